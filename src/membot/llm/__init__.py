"""The model, behind one door: what a model is to the rest of membot (model.py: messages,
one request, the answer, the ChatModel protocol), the openai client to OpenRouter (client.py,
with streaming.py, wire.py and cache.py's prompt-cache breakpoints), structured output
(structured.py, schema_regex.py), the errors every call can end in (errors.py), and the
tool-calling machinery (tools/). The prompt and the summarizer are the core's (membot.core)."""
