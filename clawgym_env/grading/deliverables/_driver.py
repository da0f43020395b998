"""Runs the deliverables extraction inside a grading sandbox: ``python3 -I -c <this file>``.

The request comes on stdin as JSON: ``key`` (hex), ``folder``, ``recalculate``, ``images``, ``max_chars`` and
``sources`` (module name -> source of this package, installed here since the sandbox has no copy of
ClawGym). The answer is one line, ``__CLAWGYM_GRADE__ <hmac> <json>``, signed with the key the way
code verifiers sign theirs: ``{"ok": true, "extraction": {...}}`` or ``{"ok": false, "error": "..."}``.
"""

import hashlib
import hmac
import json
import sys
import types


def _install(sources: dict[str, str]) -> types.ModuleType:
    package = "clawgym_env.grading.deliverables"
    for parent in ("clawgym_env", "clawgym_env.task", package):
        module = types.ModuleType(parent)
        module.__path__ = []
        sys.modules[parent] = module
    for name in sorted(sources, key=lambda n: n == package):  # the package itself last: it imports the others
        module = sys.modules[name] if name == package else types.ModuleType(name)
        module.__package__ = package
        sys.modules[name] = module
        exec(compile(sources[name], f"<{name}>", "exec"), module.__dict__)  # noqa: S102 - our own source
    return sys.modules[package]


def main() -> None:
    request = json.loads(sys.stdin.read())
    key = bytes.fromhex(request["key"])
    try:
        from pathlib import Path

        deliverables = _install(request["sources"])
        found = deliverables.extract_folder(
            Path(request["folder"]), recalculate=request["recalculate"], images=request["images"], max_chars=request["max_chars"]
        )
        payload = {"ok": True, "extraction": found.to_json()}
    except Exception as exc:  # noqa: BLE001 - reported, signed, to the grader
        payload = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    body = json.dumps(payload, ensure_ascii=True)
    mac = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    sys.stdout.write(f"\n__CLAWGYM_GRADE__ {mac} {body}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
