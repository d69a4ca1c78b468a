"""`python -m scripts.openapi [--check]`: docs/openapi.json, the OpenAPI document that
`GET /api/openapi.json` serves with the default settings.

The document is built by `membot.api.openapi.build_document` from the pydantic models that
validate requests; the only settings in it are MAX_ROUNDS (the bound of `maxRounds`) and
API_MAX_MESSAGE_CHARS (of `message`), taken at their defaults here. A running server serves
its own, with its settings. `make docs` runs this;
tests/unit/test_docs.py fails when the committed file is stale.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from membot.api.openapi import build_document
from membot.config import Settings

PATH = Path(__file__).resolve().parents[1] / "docs" / "openapi.json"


def document() -> str:
    fields = Settings.model_fields
    document = build_document(fields["max_rounds"].default, fields["api_max_message_chars"].default)
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.openapi", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    text = document()
    if args.check:
        if not PATH.exists() or PATH.read_text(encoding="utf-8") != text:
            print(f"{PATH} is stale: run `python -m scripts.openapi`", file=sys.stderr)
            return 1
        return 0
    PATH.write_text(text, encoding="utf-8")
    print(f"wrote {PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
