"""The multipart-upload ByteSink (src/remote/s3_upload_sink.*) against a real
@20minutes/s3rver 4.0.4 through the recording proxy, driven by
s3_multipart_probe's `sink` command: parts as they fill, reserved ranges
held back, kept ranges copied server-side or fetched, aborts."""
import subprocess

import pytest

import servers
from test_s3_multipart import MIB, data, probe, upload_parts  # noqa: F401


def sink(proxy, url, *args, check=True):
    p = probe(proxy, "sink", url, *args, check=check)
    if check:
        words = p.stdout.decode().split()
        return dict(uploaded=int(words[1]), copied=int(words[3]),
                    etag=words[5] if len(words) > 5 else "")
    return p


def writes(path, start, stop, step, at=None):
    """write ops for bytes [start, stop) of `path` in pieces of `step`, placed
    at `at` (default: the same offsets)."""
    at = start if at is None else at
    return [f"write:{at + o - start}:{path}:{o}:{min(step, stop - o)}"
            for o in range(start, stop, step)]


def part_sizes(proxy):
    parts = upload_parts(proxy)
    return [r["body"] for r in sorted(parts, key=lambda r: int(r["path"].split("partNumber=")[1]
                                                              .split("&")[0]))]


def test_parts_of_the_configured_size_as_they_fill(s3, data):
    fork, proxy = s3
    blob = data.read_bytes()
    out = sink(proxy, "s3://models/sunk.bin", "--part-size", 5 * MIB, "--parallel", 2,
               "--if-none-match", *writes(data, 0, len(blob), MIB), f"end:{len(blob)}")
    assert fork.get("sunk.bin") == blob
    assert out["uploaded"] == len(blob) and out["copied"] == 0
    assert part_sizes(proxy) == [5 * MIB, 5 * MIB, len(blob) - 10 * MIB]
    assert proxy.requests()[-1]["headers"]["if-none-match"] == "*"


def test_the_completion_stall_limit_is_given_for_the_object_size(s3, data):
    """A sink completes with its object's size: 24 MiB (8 s of silence with
    a low-speed time of 2 s), so a completion answered after 3 s passes."""
    fork, proxy = s3
    blob = data.read_bytes()[:12 * MIB]
    proxy.inject(lambda m, p: m == "POST" and "uploadId=" in p, ("delay", 3.0), 1)
    probe(proxy, "sink", "s3://models/sunk-slowly.bin", *writes(data, 0, 12 * MIB, 4 * MIB),
          *writes(data, 0, 12 * MIB, 4 * MIB, at=12 * MIB), f"end:{24 * MIB}",
          env_extra={"MODELZIP_LOW_SPEED_TIME": "2"})
    assert fork.get("sunk-slowly.bin") == blob + blob
    assert proxy.faults[0][2] == 0


def test_reserved_range_is_held_and_later_parts_go_on(s3, data):
    fork, proxy = s3
    blob = data.read_bytes()
    ops = [f"reserve:0:100", *writes(data, 100, len(blob), MIB), f"write:0:{data}:0:100"]
    # One part in flight: parts go out strictly in the order they are ready.
    sink(proxy, "s3://models/held.bin", "--part-size", 5 * MIB, "--parallel", 1, *ops)
    assert fork.get("held.bin") == blob
    numbers = [int(r["path"].split("partNumber=")[1].split("&")[0]) for r in upload_parts(proxy)]
    assert sorted(numbers) == [1, 2, 3]
    assert numbers.index(1) > numbers.index(2)  # part 2 went out while part 1 waited


def test_append_copies_the_prefix_and_uploads_only_new_bytes(s3, data):
    fork, proxy = s3
    blob = data.read_bytes()
    first = sink(proxy, "s3://models/ckpt.zip", *writes(data, 0, 11 * MIB, MIB))
    old = fork.get("ckpt.zip")
    proxy.clear()
    new = 7777
    out = sink(proxy, "s3://models/ckpt.zip", "--old", "ckpt.zip", "--part-size", 5 * MIB,
               f"keep:0:0:{11 * MIB}", *writes(data, 0, new, MIB, at=11 * MIB),
               f"end:{11 * MIB + new}")
    assert fork.get("ckpt.zip") == old + blob[:new]
    assert out == dict(uploaded=new, copied=11 * MIB, etag=out["etag"])
    puts = [r for r in proxy.requests() if r["method"] == "PUT"]
    assert sum(r["body"] for r in puts) == new
    copies = [r for r in puts if "x-amz-copy-source" in r["headers"]]
    assert [r["headers"]["x-amz-copy-source-range"] for r in copies] == [f"bytes=0-{11 * MIB - 1}"]
    # Copied from the version read, only.
    assert copies[0]["headers"]["x-amz-copy-source-if-match"] == first["etag"]


def test_short_kept_ranges_are_fetched_and_uploaded(s3, data):
    fork, proxy = s3
    blob = data.read_bytes()
    sink(proxy, "s3://models/small.zip", *writes(data, 0, 3 * MIB, MIB))
    proxy.clear()
    out = sink(proxy, "s3://models/small2.zip", "--old", "small.zip", f"keep:0:0:{3 * MIB}",
               f"write:{3 * MIB}:{data}:0:10")
    assert fork.get("small2.zip") == blob[:3 * MIB] + blob[:10]
    assert out["copied"] == 0 and out["uploaded"] == 3 * MIB + 10


def test_a_short_part_before_a_kept_range_is_filled_from_it(s3, data):
    fork, proxy = s3
    blob = data.read_bytes()
    sink(proxy, "s3://models/base.bin", *writes(data, 0, len(blob), 4 * MIB))
    proxy.clear()
    # 1 MiB new, then 11 MiB kept: 4 MiB of it fetched to make a 5 MiB part,
    # 7 MiB copied, then 10 new bytes.
    out = sink(proxy, "s3://models/mixed.bin", "--old", "base.bin", "--part-size", 5 * MIB,
               f"write:0:{data}:0:{MIB}", f"keep:{MIB}:{MIB}:{11 * MIB}",
               f"write:{12 * MIB}:{data}:5:10")
    assert fork.get("mixed.bin") == blob[:12 * MIB] + blob[5:15]
    assert out["copied"] == 7 * MIB and out["uploaded"] == 5 * MIB + 10
    assert part_sizes(proxy) == [5 * MIB, 10]


def test_a_failed_part_aborts_and_leaves_the_old_object(s3, data):
    fork, proxy = s3
    sink(proxy, "s3://models/safe.bin", f"write:0:{data}:0:1000")
    before = fork.get("safe.bin")
    proxy.clear()
    proxy.inject(lambda m, p: m == "PUT" and "partNumber=2" in p, (503, "SlowDown"), 100)
    p = sink(proxy, "s3://models/safe.bin", "--part-size", 5 * MIB,
             *writes(data, 0, 11 * MIB, MIB), check=False)
    assert p.returncode == 1 and b"HTTP 503 SlowDown" in p.stderr
    assert b"s3://models/safe.bin" in p.stderr
    assert fork.get("safe.bin") == before
    log = proxy.requests()
    assert log[-1]["method"] == "DELETE" and "uploadId=" in log[-1]["path"]
    assert not any(r["method"] == "POST" and "uploadId=" in r["path"] for r in log)


def test_destroyed_without_commit_aborts_and_publishes_nothing(s3, data):
    fork, proxy = s3
    sink(proxy, "s3://models/never.zip", "--no-commit", f"write:0:{data}:0:1000")
    assert proxy.requests()[-1]["method"] == "DELETE"
    with pytest.raises(subprocess.CalledProcessError):
        fork.get("never.zip")


def test_a_reserved_range_never_written_fails_finish(s3, data):
    fork, proxy = s3
    p = sink(proxy, "s3://models/hole.zip", "reserve:0:10", f"write:10:{data}:0:10", check=False)
    assert p.returncode == 1 and b"never given" in p.stderr
    assert proxy.requests()[-1]["method"] == "DELETE"


def test_shared_upload_parts_from_two_sinks(s3, data):
    """A collective commit's upload (dist/s3_commit.hpp): the creating sink
    skips a range that a joined sink uploads as parts numbered from 2; the
    parts before a skip and at a joined sink's end are stretched rather than
    cut short of 5 MiB."""
    fork, proxy = s3
    blob = data.read_bytes()
    cut, end = 5 * MIB + 100, 11 * MIB
    ops = [f"skip:{cut}:{end - cut}:3", *writes(data, 0, cut, MIB),
           f"join:{cut}:{end - cut}:2:{data}:{cut}", *writes(data, end, len(blob), MIB)]
    out = sink(proxy, "s3://models/shared.bin", "--part-size", 5 * MIB, *ops)
    assert fork.get("shared.bin") == blob
    assert part_sizes(proxy) == [cut, end - cut, len(blob) - end]
    assert out["uploaded"] == cut + len(blob) - end  # the creator's own parts


def test_an_archive_of_large_entries_holds_only_the_parts_in_flight(s3, tmp_path):
    """Each large stored entry's local header is written (its part released)
    as soon as the entry's CRC is known, not at the archive's end: 40
    entries of 8 MiB in parts of 5 MiB, 2 in flight, never buffer more than
    (2 + 2) parts; the object is byte for byte the local writer's file."""
    import zipfile
    fork, proxy = s3
    local = tmp_path / "local.zip"
    parallel, part = 2, 5 * MIB
    p = probe(proxy, "zip", "s3://models/large.zip", local, "--part-size", part,
              "--parallel", parallel, 40, 8 * MIB)
    words = p.stdout.decode().split()
    peak, uploaded = int(words[1]), int(words[3])
    blob = fork.get("large.zip")
    assert blob == local.read_bytes()
    assert uploaded == len(blob) > 320 * MIB
    assert 0 < peak <= (parallel + 2) * part, peak
    with zipfile.ZipFile(local) as z:
        assert z.testzip() is None and len(z.namelist()) == 40


def test_the_part_deadline_grows_with_the_parts_in_flight_above_four(s3, data):
    """MODELZIP_REQUEST_TIMEOUT is sized for 4 requests sharing the link: with
    32 parts in flight each part gets 8 times the time (here 8 s for a 1 s
    setting), so parts the proxy holds for 2 s each still go through; with 4
    in flight the same parts fail at the 1 s deadline."""
    fork, proxy = s3
    blob = data.read_bytes()
    ops = ["--part-size", 5 * MIB, *writes(data, 0, len(blob), MIB), f"end:{len(blob)}"]
    proxy.inject(lambda m, p: m == "PUT" and "partNumber=" in p, ("delay", 2.0), 10_000)
    env = {"MODELZIP_REQUEST_TIMEOUT": "1"}
    p = probe(proxy, "sink", "s3://models/four.bin", "--parallel", 4, *ops, env_extra=env,
              check=False)
    err = p.stderr.decode()
    assert p.returncode == 1 and "not done within 1 s" in err, err
    p = probe(proxy, "sink", "s3://models/many.bin", "--parallel", 32, *ops, env_extra=env)
    assert fork.get("many.bin") == blob
