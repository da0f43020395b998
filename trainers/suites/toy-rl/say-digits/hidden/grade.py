"""Share of the final message's non-space characters that are digits (0 for an empty message)."""


def grade(transcript, workspace_path):
    text = "".join(str(transcript.get("final_message") or "").split())
    return {"digits": sum(c.isdigit() for c in text) / len(text) if text else 0.0}
