//! verbs-shaped host driver. Work in progress: see the open issues.
