//! Given / when / then for finishing a task.
