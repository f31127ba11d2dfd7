//! Unit tests of the core (see SUPERVISOR.md §9).
