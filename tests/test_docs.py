"""The documentation stands on its own: relative links resolve (files and headings), code names
existing docs, and nothing points outside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.conftest import REPO

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
DOC_REF = re.compile(r"docs/[A-Za-z0-9_-]+\.md")


def markdown_files() -> list[Path]:
    return [REPO / "README.md", REPO / "config" / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return out


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in LINK.findall(path.read_text()):
        if re.match(r"^[a-z]+:", target):  # http(s), mailto: not checked here
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(target)
    return broken


def test_relative_links_resolve():
    assert {str(p.relative_to(REPO)): broken_links(p) for p in markdown_files() if broken_links(p)} == {}


def test_the_link_check_can_fail(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# A heading\n")
    page.write_text("[ok](there.md#a-heading) [gone](missing.md) [bad anchor](there.md#nope) [web](https://x.org)")
    assert broken_links(page) == ["missing.md", "there.md#nope"]


def tracked_text() -> dict[str, str]:
    names = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    texts = {}
    for name in names:
        path = REPO / name
        if path.is_file() and path.suffix in {".py", ".md", ".yaml", ".yml", ".smk", ".sh", ".json", ".toml", ".rst",
                                              ""}:
            try:
                texts[name] = path.read_text()
            except UnicodeDecodeError:
                continue
    return texts


def test_code_and_docs_point_only_at_docs_that_exist():
    missing = {}
    for name, text in tracked_text().items():
        gone = sorted({ref for ref in DOC_REF.findall(text) if not (REPO / ref).is_file()})
        if gone:
            missing[name] = gone
    assert missing == {}


def test_nothing_points_outside_the_repository():
    # Spelled in pieces so that this file, which must name them, does not match itself.
    design = "DESIGN"
    outside = re.compile("|".join([r"\.\./" + "shared", design + r"\.md", design + " §", "seeds" + "/"]))
    hits = {name: outside.findall(text) for name, text in tracked_text().items()}
    assert {name: found for name, found in hits.items() if found} == {}


def test_the_readmes_gpu_block_is_run_by_gpu_visits_and_never_by_ci(tmp_path):
    """scripts/run-readme.py runs ```bash blocks (CI) or, with --gpu, the ```bash gpu ones (a GPU
    visit): one README, two audiences, each block run by exactly one of them."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_readme", REPO / "scripts" / "run-readme.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    readme = (REPO / "README.md").read_text()
    gpu = module.bash_blocks(readme, "bash gpu")
    assert len(gpu) == 1 and all(line.split()[0] in ("snakemake", "soaklab") for line in gpu[0].splitlines())
    assert not any("configfile config/gpu" in block for block in module.bash_blocks(readme))
    sample = tmp_path / "README.md"
    sample.write_text("```bash gpu\necho gpu >> ran.txt\n```\n```bash\necho cpu >> ran.txt\n```\n")
    for flags, expected in (([], "cpu\n"), (["--gpu"], "cpu\ngpu\n")):
        done = subprocess.run(["python3", str(REPO / "scripts" / "run-readme.py"), *flags, str(sample)],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "ran.txt").read_text() == expected
    # a --skip that names no line is refused before anything runs
    (tmp_path / "ran.txt").unlink()
    done = subprocess.run(["python3", str(REPO / "scripts" / "run-readme.py"), "--gpu", "--skip", "echo gpu>>ran.txt",
                           str(sample)], capture_output=True, text=True)
    assert done.returncode == 2 and not (tmp_path / "ran.txt").exists()
    assert done.stderr.count("\n") == 1 and "--skip 'echo gpu>>ran.txt' names no line" in done.stderr
    done = subprocess.run(["python3", str(REPO / "scripts" / "run-readme.py"), "--gpu", "--skip", "echo gpu >> ran.txt",
                           str(sample)], capture_output=True, text=True)
    assert done.returncode == 0 and not (tmp_path / "ran.txt").exists(), done.stderr
    assert "skipping `echo gpu >> ran.txt`" in done.stdout
