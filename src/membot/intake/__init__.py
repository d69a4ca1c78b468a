"""Updates in: the intake contract (contract.py), its two implementations (journal.py: the
file journal, QUEUE=local; redis.py with stream.py and shards.py: the Redis stream,
QUEUE=redis), the sources that feed them (polling.py, webhook.py) and the runner that takes
updates and feeds each chat's in order to a handler (runner.py, lanes.py). Nothing here
imports membot.bot: the handler is a callback (membot.roles wires the dispatcher's feed)."""
