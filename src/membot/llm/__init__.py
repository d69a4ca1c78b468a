"""The model: client, prompt builder, summarizer."""
