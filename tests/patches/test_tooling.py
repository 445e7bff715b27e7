"""The patch tooling itself (python -m tools.patches): runs under plain pytest, no device needed."""

import base64
import csv
import hashlib
import io
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tools.patches import build, check, export, series
from tools.patches.diff import ApplyError, apply_hunks, parse_hunks

REPO = Path(__file__).resolve().parents[2]


def test_every_patch_lints_and_the_series_applies_to_the_installed_wheel():
    reports = check.check()
    assert [r.patch.file.name for r in reports] == [
        ln for ln in (REPO / "patches" / "series").read_text().splitlines() if ln and not ln.startswith("#")
    ]
    problems = {r.patch.file.name: r.problems for r in reports if r.problems}
    assert not problems


def test_every_python_patch_names_an_existing_proof_test_marked_with_its_id():
    for patch in series.load_series():
        if patch.needs_rebuild:
            assert "Rebuild:" in patch.body
            continue
        proof = REPO / patch.trailers["Proof"]
        assert f'torch_patch("{patch.number}")' in proof.read_text(), proof


def test_hunk_that_no_longer_matches_is_rejected_with_its_line():
    patch = next(p for p in series.load_series() if p.files[0].path == "torch/_tensor.py")
    hunks = parse_hunks(patch.files[0].diff)
    site = Path(check.installed_torch()[0])
    original = (site / "torch/_tensor.py").read_text()
    drifted = original.replace('elif self.device.type == "privateuse1":', 'elif self.device.type == "privateuse_1":')
    with pytest.raises(ApplyError, match=r"hunk #1 .* does not match at line \d+: expected .*privateuse1"):
        apply_hunks(drifted, hunks, "torch/_tensor.py")
    # An offset copy of the same file is also refused: no fuzz, no offset.
    with pytest.raises(ApplyError):
        apply_hunks("\n" + original, hunks, "torch/_tensor.py")
    assert 'torch._C._get_privateuse1_backend_name()' in apply_hunks(original, hunks, "torch/_tensor.py")


def _lint_copy(tmp_path, edit):
    patches = tmp_path / "patches"
    shutil.copytree(REPO / "patches", patches)
    target = patches / "0008-dlpack-device-privateuse1.patch"
    target.write_text(edit(target.read_text()))
    return check.lint(series.parse_patch(target))


def test_linter_rejects_a_backend_name_in_torch_code(tmp_path):
    problems = _lint_copy(tmp_path, lambda t: t.replace(
        "+            # device.type is the backend's registered name", '+            # e.g. "neuron" is the registered name'))
    assert any("mentions a backend by name" in p for p in problems), problems


def test_linter_requires_the_review_sections_and_trailers(tmp_path):
    problems = _lint_copy(tmp_path, lambda t: t.replace("\nTest plan:\n", "\nTesting:\n").replace("\nFinding: F11\n", "\n"))
    assert "commit message lacks a non-empty 'Test plan:' section" in problems
    assert any("Finding:" in p for p in problems)


def test_apply_to_a_copy_of_the_installed_wheel(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "tools.patches", "apply", *args], cwd=REPO,
                              capture_output=True, text=True, check=False)

    first = run("--copy-installed", str(tmp_path))
    assert first.returncode == 0, first.stdout + first.stderr
    checkpoint = (tmp_path / "torch/utils/checkpoint.py").read_text()
    assert "def _is_device_initialized(" in checkpoint
    compile(checkpoint, "checkpoint.py", "exec")
    header = (tmp_path / "torch/include/c10/core/TensorImpl.h").read_text()
    assert "PrivateUse1Bit" not in header.split("has_compatible_shallow_copy_type", 1)[1][:1200]
    again = run(str(tmp_path))  # already applied: refused, naming the patch and the line
    assert again.returncode == 1 and "0001-checkpoint-device-rng-state.patch" in again.stdout


def test_export_writes_one_description_per_patch(tmp_path):
    written = export.export(tmp_path)
    assert [p.name for p in written] == [f"{p.number}.md" for p in series.load_series()]
    text = (tmp_path / "0002.md").read_text()
    for heading in ("## Summary", "## Fix", "## Test plan", "## Related issues and pull requests"):
        assert heading in text
    assert "https://github.com/pytorch/pytorch/pull/196195" in text
    assert "Needs a source build" in (tmp_path / "0014.md").read_text()


def test_repacked_wheel_record_matches_its_contents():
    wheels = sorted(build.DIST_DIR.glob(f"torch-{build.PATCHED_VERSION}-*.whl"))
    if not wheels:
        pytest.skip("no repacked wheel yet: run `python -m tools.patches build`")
    with zipfile.ZipFile(wheels[-1]) as zf:
        info = f"torch-{build.PATCHED_VERSION}.dist-info"
        rows = list(csv.reader(io.StringIO(zf.read(f"{info}/RECORD").decode())))
        assert {r[0] for r in rows} == set(zf.namelist())
        assert f"Version: {build.PATCHED_VERSION}" in zf.read(f"{info}/METADATA").decode()
        for name, digest, size in rows:
            if name.endswith(".py") or name.startswith(info):
                if not digest:
                    assert name == f"{info}/RECORD"
                    continue
                data = zf.read(name)
                expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                assert digest == f"sha256={expected}" and int(size) == len(data), name
        assert "_is_device_initialized" in zf.read("torch/utils/checkpoint.py").decode()
