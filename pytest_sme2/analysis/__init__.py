"""Pure analysis of ETDump event frames: latency, categories, operators, kernel evidence."""
