"""Driver: copy one run's result folders (manifests, configs, per-attempt records; no captures, no models) into the
worktree's experiments folder, with the SFT and RL histories and the step selection."""
import json
import shutil
import sys
from pathlib import Path

run, dest = sys.argv[1], Path(sys.argv[2])
W = Path(f"/tmp/i16s7/{run}")
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
    if folder.is_dir() and (folder / "attempts").is_dir():
        copy_results(folder, dest / folder.name)
for folder in sorted((W / "rl").glob("val-step-*")):
    copy_results(folder, dest / folder.name)
sel = W / "rl" / "selection.json"
if sel.is_file():
    shutil.copy2(sel, dest / "selection.json")
    step = json.loads(sel.read_text())["step"]
    copy_results(W / "rl" / f"val-step-{step}", dest / "val-after-rl")
if (W / "rl" / "history.json").is_file():
    shutil.copy2(W / "rl" / "history.json", dest / "rl-history.json")
shutil.copy2(W / "sft" / "final" / "sft_state.json", dest / "sft_state.json")
print("collected", run, "->", dest, sorted(p.name for p in dest.iterdir()))
