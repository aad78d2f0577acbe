//! Thin Python bindings of the engine (`paccp._engine`).
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Runs one scenario (JSON of docs/engine-contract.md) and returns the output JSON.
///
/// `progress(sim_ns_done, sim_ns_total)` is called about 100 times; an exception it raises aborts the
/// run and is re-raised. Engine errors are raised as `ValueError` with the engine's message.
#[pyfunction]
#[pyo3(signature = (scenario_json, progress=None))]
fn run_json(py: Python<'_>, scenario_json: &str, progress: Option<PyObject>) -> PyResult<String> {
    let mut py_err: Option<PyErr> = None;
    let result = match progress {
        None => paccp_sim::run_json(scenario_json, None),
        Some(cb) => {
            let mut f = |done: u64, total: u64| -> Result<(), String> {
                match cb.call1(py, (done, total)) {
                    Ok(_) => Ok(()),
                    Err(e) => {
                        let msg = e.to_string();
                        py_err = Some(e);
                        Err(msg)
                    }
                }
            };
            paccp_sim::run_json(scenario_json, Some(&mut f))
        }
    };
    match result {
        Ok(s) => Ok(s),
        Err(e) => match py_err {
            Some(pe) => Err(pe),
            None => Err(PyValueError::new_err(e.to_string())),
        },
    }
}

/// The engine's own checks of a scenario's packet and transport sections (`{"packet", "transport",
/// "queues"?}` as JSON): `ValueError` naming the engine's field when one fails.
#[pyfunction]
fn check_transport_json(doc_json: &str) -> PyResult<()> {
    paccp_sim::check_transport_json(doc_json).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The engine contract as JSON (`paccp_sim::contract`): the JSON Schema of a scenario and of every
/// built-in scheme's parameters; docs/reference/engine.md is generated from it.
#[pyfunction]
fn contract_json() -> String {
    paccp_sim::contract::contract().to_string()
}

/// Mean nanoseconds of a dependent load over a random cycle through `bytes` of memory
/// (`paccp_sim::probe`): a probe of the machine, recorded next to the engine's scale figures.
#[pyfunction]
fn memory_latency_ns(py: Python<'_>, bytes: usize, loads: u64) -> f64 {
    py.allow_threads(|| paccp_sim::probe::memory_latency_ns(bytes, loads))
}

/// Python module `paccp._engine`.
#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("VERSION", paccp_sim::VERSION)?;
    m.add("SOURCE_HASH", paccp_sim::SOURCE_HASH)?;
    m.add("MEMORY_SIZES_KIB", paccp_sim::probe::SIZES_KIB.to_vec())?;
    m.add_function(wrap_pyfunction!(run_json, m)?)?;
    m.add_function(wrap_pyfunction!(memory_latency_ns, m)?)?;
    m.add_function(wrap_pyfunction!(check_transport_json, m)?)?;
    m.add_function(wrap_pyfunction!(contract_json, m)?)?;
    Ok(())
}
