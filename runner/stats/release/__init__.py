"""A release verdict from its tasks' verdicts: GO as an intersection-union test over the critical tasks, NO-GO
from one Holm family over every claim that can block the release."""
