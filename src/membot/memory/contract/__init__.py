"""The storage contract every memory backend keeps: the repository protocol and the records
it stores (messages, summaries, meta, a conversation's state, attachments, delivery marks).
No backend here: the backends are beside it (files, redis, outage, inmemory)."""
