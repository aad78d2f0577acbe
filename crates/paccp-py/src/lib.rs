//! Thin Python bindings of the engine (`paccp._engine`).
use pyo3::prelude::*;

/// Python module `paccp._engine`.
#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("VERSION", paccp_sim::VERSION)?;
    Ok(())
}
