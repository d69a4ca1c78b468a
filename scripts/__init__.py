"""Small generators of files that are committed beside their source (run from the project
directory as `uv run python -m scripts.<name>`)."""
