"""Prints the folder `meson install` should put the modelzip package in (see meson.build).

Usage: site_dir.py PREFIX MESON_CHOICE
"""
import sys
import sysconfig

prefix, chosen = sys.argv[1].rstrip("/"), sys.argv[2]
default = sysconfig.get_path("platlib")
if chosen not in sys.path and default in sys.path and default.startswith(prefix + "/"):
    chosen = default
print(chosen)
