//! Backend processes of a lab run (being built).
