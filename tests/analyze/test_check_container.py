"""The container row of ``check``: the recorded image against this machine's, by digest first."""

from __future__ import annotations

import pytest

from relaxrepro.analyze.check import judge

A, B = "sha256:" + "a" * 64, "sha256:" + "b" * 64
PT = "nvcr.io/nvidia/pytorch:24.05-py3"


def _c(runtime=None, name=None, digest=None, source="RELAXREPRO_IMAGE"):
    image = {k: v for k, v in (("name", name), ("digest", digest)) if v}
    if digest:
        image["digest_source"] = source
    c = {"evidence": ["test"]}
    if runtime:
        c["runtime"] = runtime
    if image:
        c["image"] = image
    return c


def _row(rec, here):
    rec_doc = {"run_id": "r"} if rec is None else {"run_id": "r", "container": rec}
    here_doc = {} if here is None else {"container": here}
    rows = [i for i in judge(rec_doc, here_doc).items if i.item == "container"]
    assert len(rows) == 1
    return rows[0]


@pytest.mark.parametrize("rec,here,verdict,note", [
    (_c("apptainer", "pytorch.sif", A, "sif"), _c("apptainer", "pytorch.sif", A, "sif"), "PASS", ""),
    (_c("docker", PT, A), _c(None, "other-name", A), "PASS", ""),
    (_c("docker", PT, A), _c("docker", PT, B), "WARN", "same name, other digest"),
    (_c("docker", PT, A), _c("docker", "nvcr.io/nvidia/pytorch:23.10-py3", B), "FAIL", "another image"),
    (_c("docker", PT, A), _c("podman", "nvcr.io/nvidia/pytorch:23.10-py3"), "FAIL", "another image"),
    (_c("apptainer", "pytorch.sif", A, "sif"), None, "FAIL", "recorded in a container, none here"),
    (_c("apptainer", PT, A), _c("docker"), "FAIL", "recorded in apptainer, here in docker"),
    (_c("docker", PT, A), _c("docker"), "WARN",
     "the image here is not identified (set RELAXREPRO_IMAGE=NAME@sha256:... to compare)"),
    (_c("docker", PT), _c("docker", PT, A), "WARN", "same name; no digest recorded to compare"),
    (_c("docker", PT, A), _c("docker", PT), "WARN", "same name; no digest here to compare"),
    (_c("docker"), _c("docker"), "not recorded", "the run's image was not identified"),
    (_c("docker"), _c("podman", PT, A), "WARN", "recorded in docker (image not identified), here in podman"),
    (_c("docker"), None, "FAIL", "recorded in a container, none here"),
    (_c("podman", PT, A, "podman"), _c("podman", PT, B), "WARN",
     "digests of different kinds (recorded: an image id, here: a registry digest): cannot compare"),
    (_c("apptainer", "pt.sif", A, "sif"), _c("apptainer", PT, B), "WARN",
     "digests of different kinds (recorded: a SIF file's sha256, here: a registry digest): cannot compare"),
    (None, _c("docker", PT, A), "not recorded", ""),
    (None, None, "not recorded", ""),
], ids=["same-sif", "same-digest-other-name", "same-name-other-digest", "other-image", "other-name-no-digest",
        "none-here", "other-runtime-unidentified", "same-runtime-unidentified", "name-only-recorded",
        "name-only-here", "podman-id-vs-registry", "sif-vs-registry", "unidentified-both",
        "unidentified-other-runtime", "unidentified-none-here", "not-recorded", "nowhere"])
def test_container_verdicts(rec, here, verdict, note):
    row = _row(rec, here)
    assert (row.verdict, row.note) == (verdict, note)


def test_the_cells_show_name_digest_and_runtime():
    row = _row(_c("docker", PT, A), None)
    assert (row.recorded, row.here) == ("%s@sha256:aaaaaaaaaaaa (docker)" % PT, "none")
