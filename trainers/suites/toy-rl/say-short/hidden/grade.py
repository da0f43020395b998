"""Brevity: 1 for an empty final message, falling linearly to 0 at 128 characters."""


def grade(transcript, workspace_path):
    text = str(transcript.get("final_message") or "")
    return {"brevity": max(0.0, 1.0 - len(text) / 128.0)}
