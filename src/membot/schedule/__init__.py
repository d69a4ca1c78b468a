"""Reminders and scheduled tasks: what a task is (models.py), how its times are read and
worked out (rules.py), and where tasks are kept (store.py: the contract; the files, Redis and
in-memory backends). A due task reaches the chat as an update through the intake
(the intake's clock source), and its turn is the core's ."""

from membot.schedule.models import TASK_UPDATE, Firing, Task, firing_of, new_task_id
from membot.schedule.rules import BadSchedule
from membot.schedule.store import TaskStore

__all__ = ["TASK_UPDATE", "BadSchedule", "Firing", "Task", "TaskStore", "firing_of", "new_task_id"]
