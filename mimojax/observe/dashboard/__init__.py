"""The live run dashboard: `mimojax dashboard WORKDIR [WORKDIR ...]`.

`data.py` follows each run's metrics.jsonl (new lines only) and computes what the page shows
besides raw series (costs, restarts, held-out vs time and $); `panels.py` names the panels and
the metrics each plots; `server.py` serves the page, plotly.js from the installed plotly
package (never a CDN) and a JSON poll endpoint; `static/` holds the page and its script.
"""
