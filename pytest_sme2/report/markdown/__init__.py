"""report.md and the per-benchmark pages: :mod:`.render` (the entry points ``render_report``,
``render_markdown``, ``render_details``; the templates' context), :mod:`.sections` (report.md's
rows), :mod:`.unit_page` (a benchmark's page), :mod:`.cells` (the number formats, the
templates' filters), :mod:`.charts` (the figures, drawn with matplotlib) and ``templates/``."""
