-- The diagnosis grid's window length (ns): how near two findings' windows must be for one
-- to explain the other (traceq/playbooks/incidents.py).
SELECT any_value(window_ns) AS window_ns FROM diag_window
