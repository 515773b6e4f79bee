"""Where a task's rows come from: local, packaged or Hub sources, file readers, upstream's shuffles."""
