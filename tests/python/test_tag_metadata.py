"""A tag's free-form metadata (FORMAT.md section 3.1), as safetensors users know it from
save_file(..., metadata=) and safe_open(...).metadata(): given at every save, read back per tag,
kept from imported safetensors files, written back by exports, shown by the CLI."""
import json
import subprocess

import numpy as np
import pytest
import torch

import modelzip
import modelzip.torch as mzt
from conftest import CLI, write_safetensors

PAIRS = {"format": "pt", "": "empty key", "lines": "a\nb", "text": "grüße \u20ac"}


def test_save_keeps_free_form_metadata_per_tag(archive_path):
    modelzip.save(archive_path, "step-1", {"w": np.ones(2)}, tag_metadata=PAIRS, durable=False)
    modelzip.save(archive_path, "step-2", {"w": np.zeros(2)}, durable=False)
    with modelzip.open(archive_path) as archive:
        assert archive.tag_metadata("step-1") == PAIRS
        assert archive.tag_metadata("STEP-1") == PAIRS
        assert archive.tag_metadata("step-2") == {}
        assert archive.tag_metadata() == {}  # the newest
        assert archive.verify() == []
        with pytest.raises(modelzip.NotFoundError, match="no such tag"):
            archive.tag_metadata("step-3")
    assert modelzip.imported_metadata(archive_path, "step-1") == PAIRS  # one place for both


def test_every_save_takes_it(archive_path):
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    mzt.save(model.state_dict(), archive_path, "torch", tag_metadata={"k": "torch"},
             durable=False)
    modelzip.save_async(archive_path, "async", {"w": np.ones(1)},
                        tag_metadata={"k": "async"}).result()
    mzt.save_checkpoint(archive_path, "checkpoint", model, optimizer,
                        tag_metadata={"k": "checkpoint"}, durable=False)
    mzt.save_checkpoint(archive_path, "background", model, optimizer,
                        tag_metadata={"k": "background"}, blocking=False).result()
    with modelzip.Writer(archive_path, durable=False) as writer:
        writer.add_tag("writer", {"w": np.ones(1)}, tag_metadata={"k": "writer"})
    with modelzip.open(archive_path) as archive:
        assert {tag: archive.tag_metadata(tag) for tag in archive.tags} == {
            tag: {"k": tag} for tag in ("torch", "async", "checkpoint", "background", "writer")}


def test_safetensors_metadata_argument_is_not_taken_for_archive_fields(archive_path):
    # save_file(tensors, path, metadata={"format": "pt"}): metadata= of modelzip's saves sets the
    # archive's fields; the message says where free-form pairs go.
    with pytest.raises(ValueError, match="unknown metadata field 'format'.*tag_metadata="):
        mzt.save({"w": torch.ones(1)}, archive_path, "t", metadata={"format": "pt"})
    assert not archive_path.exists()


@pytest.mark.parametrize("bad, error, match", [
    (["format"], TypeError, "tag_metadata must be a mapping of str to str, not list"),
    ({"step": 1}, TypeError, r"mapping of str to str .*'step' -> int"),
    ({1: "x"}, TypeError, "mapping of str to str"),
    ({"k": "\udcff"}, ValueError, r"tag_metadata\['k'\]: metadata must be UTF-8 text"),
])
def test_bad_metadata_is_refused_before_anything_is_written(archive_path, bad, error, match):
    with pytest.raises(error, match=match):
        modelzip.save(archive_path, "t", {"w": np.ones(1)}, tag_metadata=bad, durable=False)
    assert not archive_path.exists()


def test_imported_safetensors_metadata_is_the_tags_metadata_and_exports_back(archive_path,
                                                                             tmp_path):
    source = tmp_path / "w.safetensors"
    write_safetensors(source, {"w": ("F32", [1], np.ones(1, np.float32).tobytes())})
    text = source.read_bytes()
    header_len = int.from_bytes(text[:8], "little")
    header = json.loads(text[8:8 + header_len])
    header["__metadata__"] = {"format": "pt", "source": "hub"}
    new_header = json.dumps(header).encode()
    new_header += b" " * (-len(new_header) % 8)
    source.write_bytes(len(new_header).to_bytes(8, "little") + new_header + text[8 + header_len:])
    modelzip.import_tensor_files(archive_path, "imported", [source])
    with modelzip.open(archive_path) as archive:
        assert archive.tag_metadata("imported") == {"format": "pt", "source": "hub"}
    modelzip.save(archive_path, "saved", {"w": np.ones(1, np.float32)},
                  tag_metadata={"format": "pt", "note": "mine"}, durable=False)
    out = tmp_path / "again.safetensors"
    modelzip.export_tensor_file(archive_path, out, "saved")
    assert modelzip.read_tensor_file(out)[1] == {"format": "pt", "note": "mine"}


@pytest.mark.skipif(CLI is None, reason="MODELZIP_CLI not set")
def test_cli_meta_prints_a_tags_metadata(archive_path):
    modelzip.save(archive_path, "t", {"w": np.ones(1)}, tag_metadata={"format": "pt", "b": "2"},
                  durable=False)
    run = subprocess.run([CLI, "meta", str(archive_path), "--tag", "t", "--json"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"format": "pt", "b": "2"}
    run = subprocess.run([CLI, "meta", str(archive_path), "--tag", "t"], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0 and run.stdout == "b = 2\nformat = pt\n"
    run = subprocess.run([CLI, "meta", str(archive_path), "--tag", "t", "--name", "x"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "--tag shows a tag's metadata" in run.stderr
