// Symbols of modelzip 0.1.0 that the shared library keeps exporting after
// their functions changed signature in a way that changed the mangled name
// but not the calling convention (a const member function that became
// `const&`-qualified): programs linked against 0.1.0 keep resolving them.
//
// MODELZIP_KEEP_SYMBOL(old, current) makes the mangled name `old` a global
// alias of the mangled name `current`, a function defined in the same
// translation unit (the assembler resolves the alias there). Both names are
// written out in full; a `current` that does not exist leaves an undefined
// reference, which the link of libmodelzip.so (--no-undefined) refuses.
#pragma once

#define MODELZIP_KEEP_SYMBOL(old_name, current_name) \
  asm(".globl " #old_name "\n.set " #old_name ", " #current_name)
