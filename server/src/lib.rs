//! agenthold server library.
