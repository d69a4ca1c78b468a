"""Updates in: the intake contract (contract.py), its two implementations (the journal,
QUEUE=local: journal.py with journal_files.py; the stream, QUEUE=redis: redis.py with
stream.py, shards.py and controls.py), the sources that feed them (polling.py, webhook.py) and
the runner that takes updates and feeds each chat's in order to a handler (runner.py, lanes.py,
albums.py; repeats.py tells an update answered already). Nothing here imports membot.bot: the
handler is a callback (membot.roles wires the dispatcher's feed)."""
