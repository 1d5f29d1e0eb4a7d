//! The studies' backend, built in (placeholder until the backend work lands).
