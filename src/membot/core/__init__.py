"""The transport-free conversation core: the turn and what it needs, for every front door.

The conversation service (service.py) and API sessions (sessions.py, session_sweep.py); the
turn's words (turn.py), the agent (agent.py) with its turn plan (plan.py), the exchange with
the model in tool steps (steps.py) and the prompt (prompt.py, window.py); consultations
(consult.py), kept facts (facts.py), the conversation's language (language.py), files a turn
brings (media.py), stopping an answer (stops.py), the rolling summary (summarizer.py); the
built-in tools (tools/); what the core asks of a turn lock and a summary lease across
processes (turnlock.py, lease.py: Redis's are in membot.redis)."""
