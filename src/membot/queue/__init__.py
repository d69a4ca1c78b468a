"""Scale-out over Redis Streams (QUEUE=redis): the stream of updates, the shards each worker
holds, and the worker that answers them in each chat's order. No aiogram here."""
