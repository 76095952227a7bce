//! deterministic discrete-event RoCE fabric simulator. Work in progress: see the open issues.
