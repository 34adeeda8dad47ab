"""What a session's results become: the terminal's lines and summary table (terminal), report.md
with its charts and a page per benchmark (markdown/), the findings it recommends (recommend/),
pytest-benchmark's JSON, llama-bench rows and the GitHub step summary, each figure declared once
(columns), the session's view every renderer is handed (view: the sides and units of grouping
and digest, built once), and the files a session writes at its end (outputs). Renderers render:
pooling and kernel naming happen below them."""
