"""Reports for other tools: lm-evaluation-harness-shaped results, JUnit XML, markdown summaries."""
