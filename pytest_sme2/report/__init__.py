"""What a session's results become: the terminal's lines and summary table (terminal), report.md
with its charts and a page per benchmark (markdown/), the findings it recommends (recommend/),
pytest-benchmark's JSON, llama-bench rows and the GitHub step summary, each figure declared once
(columns), the units and sides every report reads (digest, grouping), and the files a session
writes at its end (outputs). Renderers render: pooling and kernel naming happen below them."""
