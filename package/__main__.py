"""The component package's plugin: Pulumi runs it to read the schema and to build the
components a TypeScript, Go, C#, Java or YAML program declares."""

import sys
from pathlib import Path

# The components live beside this directory, in the same checkout.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from components.package.provider import serve  # noqa: E402

if __name__ == "__main__":
    serve()
