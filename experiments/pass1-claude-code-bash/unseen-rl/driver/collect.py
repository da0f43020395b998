"""Driver: copy one run's result folders (manifests, configs, per-attempt records; no captures, no models) into the
worktree's experiments folder, with the probe, the probed mix, the SFT and RL histories."""
import shutil
import sys
from pathlib import Path

run, dest = sys.argv[1], Path(sys.argv[2])
W = Path(f"/tmp/i16s8/{run}")
dest.mkdir(parents=True, exist_ok=True)


def copy_results(src: Path, to: Path) -> None:
    if to.exists():
        shutil.rmtree(to)
    to.mkdir(parents=True)
    for name in ("manifest.json", "config.json"):
        if (src / name).is_file():
            shutil.copy2(src / name, to / name)
    shutil.copytree(src / "attempts", to / "attempts")


for folder in sorted((W / "out").iterdir()):
    if folder.is_dir() and (folder / "attempts").is_dir() and (folder / "manifest.json").is_file():
        copy_results(folder, dest / folder.name)
copy_results(W / "probe", dest / "probe")
shutil.copy2(W / "probe" / "categories.json", dest / "probe-categories.json")
if (W / "rl" / "history.json").is_file():
    shutil.copy2(W / "rl" / "history.json", dest / "rl-history.json")
shutil.copy2(W / "sft" / "final" / "sft_state.json", dest / "sft_state.json")
print("collected", run, "->", dest, sorted(p.name for p in dest.iterdir()))
