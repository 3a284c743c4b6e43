//! lash-diff-runner: run Lashlang programs on the upstream Rust implementation
//! (crates/lashlang) with a stub host, printing one JSON outcome line each.
//!
//! Usage:
//!   lash-diff-runner PROGRAM.lash [HOST.json]   one program, one output line
//!   lash-diff-runner --serve                    JSON lines on stdin -> JSON lines on stdout
//!
//! A request (serve mode) is `{"source": "...", "stubs": {...}, "signals": {...}}`; HOST.json is
//! `{"stubs": {...}, "signals": {...}}`. Stub forms (module `tools`, one operation per stub name,
//! `any` input/output): `{"ok": V}`, `{"error": "m"}`, `"echo"` or `{"echo": true}`,
//! `{"seq": [spec, ...]}`, `{"by": {"field": F, "cases": {K: spec}, "default": spec}}`.
//!
//! Outcome line (one JSON object):
//!   {"outcome":"finished","value":V,"prints":[..],"calls":[..]}
//!   {"outcome":"continued","globals":{..},"prints":[..],"calls":[..]}
//!   {"outcome":"failed","value":V,...}                    (only reachable from a process body)
//!   {"outcome":"parse_error","message":M,"line":L,"column":C}
//!   {"outcome":"link_error","message":M}
//!   {"outcome":"runtime_error","kind":K,"message":M,"prints":[..],"calls":[..]}
//!   {"outcome":"panic","stage":"parse|link|run","message":M}
//!
//! Harness conventions follow the study that produced the conformance outcomes: host catalog =
//! one module `tools` (resource type `Tools`), abilities all enabled, label annotations enabled,
//! main in foreground mode; `start` runs the child to completion right away (same stub host);
//! `await` on a handle gives `{ok:true,value}` / `{ok:false,error}`.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io::{BufRead, Write};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use lashlang::{
    AbilityOp, AbilityResult, ExecutionEnvironment, ExecutionHost, ExecutionHostError,
    ExecutionOutcome, LashlangAbilities, LashlangHostCatalog, LashlangHostEnvironment,
    LashlangLanguageFeatures, LinkedModule, Record, ResourceOperation,
    ResourceOperationBatchResult, ResourceOperationResult, RuntimeError, SleepKind, Snapshot,
    State, TypeExpr, Value,
};
use serde_json::{Value as Json, json};

const MAX_CHILD_DEPTH: usize = 16;
const MAX_CHILDREN: usize = 200;

struct StubHost {
    stubs: serde_json::Map<String, Json>,
    seq_pos: Mutex<HashMap<String, usize>>,
    signals: Mutex<HashMap<String, VecDeque<Json>>>,
    linked: Option<Arc<LinkedModule>>,
    children: Mutex<HashMap<String, Result<Value, String>>>,
    next_child: AtomicUsize,
    depth: AtomicUsize,
    prints: Mutex<Vec<String>>,
    calls: Mutex<Vec<Json>>,
    events: Mutex<Vec<Json>>,
}

fn value_json(value: &Value) -> Json {
    serde_json::to_value(value).unwrap_or_else(|err| json!({"__unserializable__": err.to_string()}))
}

fn record_value(pairs: Vec<(&str, Value)>) -> Value {
    let mut record = Record::new();
    for (k, v) in pairs {
        record.insert(k.to_string(), v);
    }
    Value::Record(Arc::new(record))
}

impl StubHost {
    fn new(stubs: serde_json::Map<String, Json>, signals: &Json) -> Self {
        let mut queues = HashMap::new();
        if let Some(map) = signals.as_object() {
            for (name, payloads) in map {
                let items: VecDeque<Json> = payloads
                    .as_array()
                    .map(|a| a.iter().cloned().collect())
                    .unwrap_or_default();
                queues.insert(name.clone(), items);
            }
        }
        Self {
            stubs,
            seq_pos: Mutex::new(HashMap::new()),
            signals: Mutex::new(queues),
            linked: None,
            children: Mutex::new(HashMap::new()),
            next_child: AtomicUsize::new(0),
            depth: AtomicUsize::new(0),
            prints: Mutex::new(Vec::new()),
            calls: Mutex::new(Vec::new()),
            events: Mutex::new(Vec::new()),
        }
    }

    fn environment(&self) -> LashlangHostEnvironment {
        let mut catalog = LashlangHostCatalog::new();
        let mut names: Vec<&String> = self.stubs.keys().collect();
        if names.is_empty() {
            // an empty module would not exist at all; keep `tools` resolvable
            return LashlangHostEnvironment::new(
                {
                    let mut c = LashlangHostCatalog::new();
                    c.add_module_operation(["tools"], "Tools", "noop", "noop", TypeExpr::Any, TypeExpr::Any);
                    c
                },
                LashlangAbilities::all(),
            )
            .with_language_features(LashlangLanguageFeatures::default().with_label_annotations());
        }
        names.sort();
        for name in names {
            catalog.add_module_operation(
                ["tools"],
                "Tools",
                name.as_str(),
                name.as_str(),
                TypeExpr::Any,
                TypeExpr::Any,
            );
        }
        LashlangHostEnvironment::new(catalog, LashlangAbilities::all())
            .with_language_features(LashlangLanguageFeatures::default().with_label_annotations())
    }

    fn stub_answer(&self, name: &str, spec: &Json, args: &[Value]) -> Result<Value, ExecutionHostError> {
        // `echo` returns the first argument; with no argument at all it returns the (empty)
        // input object, as lashflow's MemoryHost does. It goes through JSON as a real tool's
        // result does (a tuple comes back a list).
        let first = || {
            let arg = args.first().cloned().unwrap_or_else(|| Value::Record(Arc::new(Record::new())));
            lashlang::from_json(value_json(&arg))
        };
        if spec.as_str() == Some("echo") {
            return Ok(first());
        }
        let Some(obj) = spec.as_object() else {
            return Err(ExecutionHostError::new(format!("bad stub spec for `tools.{name}`")));
        };
        if obj.contains_key("echo") {
            return Ok(first());
        }
        if let Some(v) = obj.get("ok") {
            return Ok(lashlang::from_json(v.clone()));
        }
        if let Some(e) = obj.get("error") {
            let text = match e {
                Json::String(s) => s.clone(),
                other => other.to_string(),
            };
            return Err(ExecutionHostError::new(text));
        }
        if let Some(Json::Array(items)) = obj.get("seq") {
            let i = {
                let mut pos = self.seq_pos.lock().unwrap();
                let slot = pos.entry(name.to_string()).or_insert(0);
                let i = *slot;
                *slot += 1;
                i
            };
            return match items.get(i) {
                Some(item) => self.stub_answer(name, item, args),
                None => Err(ExecutionHostError::new(format!("stub `tools.{name}` has no answer left"))),
            };
        }
        if let Some(rule) = obj.get("by") {
            let field = rule.get("field").and_then(Json::as_str).unwrap_or("");
            let key = args
                .first()
                .and_then(Value::as_record)
                .and_then(|r| r.get(field))
                .map(|v| match v {
                    Value::String(s) => s.to_string(),
                    other => other.to_string(),
                });
            let case = key
                .as_ref()
                .and_then(|k| rule.get("cases").and_then(|c| c.get(k.as_str())));
            return match case {
                Some(case) => self.stub_answer(name, case, args),
                None => match rule.get("default") {
                    Some(d) => self.stub_answer(name, d, args),
                    None => Err(ExecutionHostError::new(format!(
                        "no stub case for {}",
                        key.unwrap_or_else(|| "null".into())
                    ))),
                },
            };
        }
        Err(ExecutionHostError::new(format!("bad stub spec for `tools.{name}`")))
    }

    fn resource_operation(&self, op: &ResourceOperation) -> Result<Value, ExecutionHostError> {
        let name = op.operation.clone();
        // call-log encoding of the input (host-defined): one record argument is the
        // input object itself, anything else is {"args": [...]} (no argument: {})
        let input = match op.args.as_slice() {
            [] => json!({}),
            [Value::Record(_)] => value_json(&op.args[0]),
            _ => json!({"args": op.args.iter().map(value_json).collect::<Vec<_>>()}),
        };
        self.calls
            .lock()
            .unwrap()
            .push(json!({"tool": format!("tools.{name}"), "input": input}));
        match self.stubs.get(&name) {
            Some(spec) => {
                let spec = spec.clone();
                self.stub_answer(&name, &spec, &op.args)
            }
            None => Err(ExecutionHostError::new(format!("unknown tool `tools.{name}`"))),
        }
    }

    fn run_child<'a>(
        &'a self,
        process_name: String,
        args: Record,
    ) -> Pin<Box<dyn Future<Output = Result<Value, String>> + Send + 'a>> {
        Box::pin(async move {
            let Some(linked) = self.linked.clone() else {
                return Err("no linked module".to_string());
            };
            let compiled = match lashlang::compile_linked_process(&linked, &process_name) {
                Ok(c) => c,
                Err(err) => return Err(err.to_string()),
            };
            let mut state = State::from_snapshot(Snapshot { globals: args });
            let env = ExecutionEnvironment::new(self).process();
            let result = lashlang::execute(&compiled, &mut state, &env).await;
            match result {
                Ok(ExecutionOutcome::Finished(v)) => Ok(v),
                Ok(ExecutionOutcome::Continued) => Ok(Value::Null),
                Ok(ExecutionOutcome::Failed(v)) => Err(v.to_string()),
                Err(err) => Err(err.to_string()),
            }
        })
    }

    async fn start_process(&self, process_name: String, args: Record) -> Result<Value, ExecutionHostError> {
        let n = self.next_child.fetch_add(1, Ordering::SeqCst);
        if n >= MAX_CHILDREN {
            return Err(ExecutionHostError::new("stub host: too many child processes"));
        }
        let depth = self.depth.fetch_add(1, Ordering::SeqCst);
        if depth >= MAX_CHILD_DEPTH {
            self.depth.fetch_sub(1, Ordering::SeqCst);
            return Err(ExecutionHostError::new("stub host: child process nesting too deep"));
        }
        let id = format!("run/{n}");
        self.events.lock().unwrap().push(json!({
            "kind": "start", "process": process_name, "child": id,
            "args": value_json(&Value::Record(Arc::new(args.clone())))
        }));
        let outcome = self.run_child(process_name, args).await;
        self.depth.fetch_sub(1, Ordering::SeqCst);
        self.children.lock().unwrap().insert(id.clone(), outcome);
        Ok(record_value(vec![
            ("__handle__", Value::String("process".into())),
            ("id", Value::String(id.as_str().into())),
        ]))
    }

    fn await_handle(&self, handle: &Value) -> Result<Value, ExecutionHostError> {
        let id = handle
            .as_record()
            .and_then(|r| r.get("id"))
            .and_then(|v| match v {
                Value::String(s) => Some(s.to_string()),
                _ => None,
            });
        let Some(id) = id else {
            return Err(ExecutionHostError::new("expected handle record"));
        };
        match self.children.lock().unwrap().get(&id) {
            Some(Ok(v)) => Ok(v.clone()),
            Some(Err(e)) => Err(ExecutionHostError::new(e.clone())),
            None => Err(ExecutionHostError::new("expected handle record")),
        }
    }
}

fn duration_ok(kind: SleepKind, value: &Value) -> Result<(), ExecutionHostError> {
    // port of lash-lashlang-runtime bridge.rs (sleep_duration_ms) validation; time is instant
    match (kind, value) {
        (_, Value::Number(n)) if n.is_finite() && *n >= 0.0 => Ok(()),
        (SleepKind::For, Value::String(s)) => {
            let v = s.trim();
            let number = if let Some(n) = v.strip_suffix("ms") {
                n
            } else if let Some(n) = v.strip_suffix('s') {
                n
            } else if let Some(n) = v.strip_suffix('m') {
                n
            } else if let Some(n) = v.strip_suffix('h') {
                n
            } else {
                v
            };
            match number.trim().parse::<f64>() {
                Err(err) => Err(ExecutionHostError::new(format!("invalid duration `{v}`: {err}"))),
                Ok(p) if !p.is_finite() || p < 0.0 => Err(ExecutionHostError::new(format!(
                    "invalid duration `{v}`: expected a non-negative finite number"
                ))),
                Ok(_) => Ok(()),
            }
        }
        (SleepKind::Until, Value::String(_)) => Ok(()), // RFC 3339 not checked (no chrono offline)
        (SleepKind::For, other) => Err(ExecutionHostError::new(format!(
            "`sleep for` expects a non-negative millisecond number or duration string, got {other}"
        ))),
        (SleepKind::Until, other) => Err(ExecutionHostError::new(format!(
            "`sleep until` expects RFC3339 text or Unix epoch milliseconds, got {other}"
        ))),
    }
}

impl ExecutionHost for StubHost {
    async fn perform(&self, op: AbilityOp) -> Result<AbilityResult, ExecutionHostError> {
        match op {
            AbilityOp::ResourceOperation(operation) => {
                self.resource_operation(&operation).map(AbilityResult::Value)
            }
            AbilityOp::ResourceOperationBatch(batch) => {
                let results = batch
                    .operations
                    .iter()
                    .map(|operation| ResourceOperationResult::from_result(self.resource_operation(operation)))
                    .collect();
                Ok(AbilityResult::ResourceOperationBatch(ResourceOperationBatchResult { results }))
            }
            AbilityOp::StartProcess(start) => {
                let start = *start;
                self.start_process(start.process_name, start.args)
                    .await
                    .map(AbilityResult::Value)
            }
            AbilityOp::Await(handle) => self.await_handle(&handle).map(AbilityResult::Value),
            AbilityOp::Cancel(handle) => {
                self.events.lock().unwrap().push(json!({"kind": "cancel", "handle": value_json(&handle)}));
                Ok(AbilityResult::Unit)
            }
            AbilityOp::Print(value) => {
                self.prints.lock().unwrap().push(value.to_string());
                Ok(AbilityResult::Unit)
            }
            AbilityOp::ProcessEvent(event) => {
                self.events.lock().unwrap().push(json!({
                    "kind": format!("{:?}", event.kind).to_lowercase(),
                    "value": value_json(&event.value), "text": event.value.to_string()
                }));
                Ok(AbilityResult::Unit)
            }
            AbilityOp::Sleep(sleep) => {
                duration_ok(sleep.kind, &sleep.value)?;
                Ok(AbilityResult::Value(Value::Null))
            }
            AbilityOp::WaitSignal { name } => {
                let next = self
                    .signals
                    .lock()
                    .unwrap()
                    .get_mut(&name)
                    .and_then(|q| q.pop_front());
                match next {
                    Some(payload) => Ok(AbilityResult::Value(lashlang::from_json(payload))),
                    None => Err(ExecutionHostError::new(format!("no `{name}` signal arrived"))),
                }
            }
            AbilityOp::SignalRun(signal) => {
                // children have already run to completion in this host
                let is_handle = signal
                    .run
                    .as_record()
                    .and_then(|r| r.get("__handle__"))
                    .is_some();
                if !is_handle {
                    return Err(ExecutionHostError::new("signal_run expects a process handle"));
                }
                Ok(AbilityResult::Value(Value::Null))
            }
            AbilityOp::Finish(value) | AbilityOp::Fail(value) => Ok(AbilityResult::Value(value)),
        }
    }
}

fn runtime_kind(err: &RuntimeError) -> &'static str {
    match err {
        RuntimeError::UndefinedVariable { .. } => "UndefinedVariable",
        RuntimeError::NonListIteration => "NonListIteration",
        RuntimeError::SessionProcessAdminOutsideProcess { .. } => "SessionProcessAdminOutsideProcess",
        RuntimeError::ForegroundControlInsideProcess { .. } => "ForegroundControlInsideProcess",
        RuntimeError::UnknownBuiltin { .. } => "UnknownBuiltin",
        RuntimeError::TypeError { .. } => "TypeError",
        RuntimeError::ValueError { .. } => "ValueError",
    }
}

fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let mut line = 1usize;
    let mut line_start = 0usize;
    for (idx, ch) in source.char_indices() {
        if idx >= offset {
            break;
        }
        if ch == '\n' {
            line += 1;
            line_start = idx + ch.len_utf8();
        }
    }
    // count chars up to offset even when offset is not a char boundary
    let col = source
        .char_indices()
        .filter(|(i, _)| *i >= line_start && *i < offset)
        .count()
        + 1;
    (line, col)
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

fn run_program(source: &str, stubs: serde_json::Map<String, Json>, signals: &Json) -> Json {
    let stage = Arc::new(Mutex::new("parse"));
    let stage2 = stage.clone();
    let source_owned = source.to_string();
    let signals = signals.clone();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        run_program_inner(&source_owned, stubs, &signals, &stage2)
    }));
    match result {
        Ok(out) => out,
        Err(payload) => json!({
            "outcome": "panic",
            "stage": *stage.lock().unwrap_or_else(|e| e.into_inner()),
            "message": panic_message(payload),
        }),
    }
}

fn run_program_inner(
    source: &str,
    stubs: serde_json::Map<String, Json>,
    signals: &Json,
    stage: &Mutex<&'static str>,
) -> Json {
    let program = match lashlang::parse(source) {
        Ok(p) => p,
        Err(err) => {
            let (line, column) = line_col(source, err.offset());
            return json!({"outcome": "parse_error", "message": err.to_string(), "line": line, "column": column});
        }
    };
    *stage.lock().unwrap() = "link";
    let mut host = StubHost::new(stubs, signals);
    let env = host.environment();
    let linked = match LinkedModule::link(program, env) {
        Ok(l) => Arc::new(l),
        Err(err) => return json!({"outcome": "link_error", "message": err.to_string()}),
    };
    *stage.lock().unwrap() = "run";
    let compiled = lashlang::compile_linked(&linked);
    host.linked = Some(linked);
    let mut state = State::new();
    let result = {
        let env = ExecutionEnvironment::new(&host).foreground();
        futures_executor::block_on(lashlang::execute(&compiled, &mut state, &env))
    };
    let prints = host.prints.lock().unwrap().clone();
    let calls = host.calls.lock().unwrap().clone();
    let events = host.events.lock().unwrap().clone();
    let mut out = match result {
        Ok(ExecutionOutcome::Finished(v)) => json!({"outcome": "finished", "value": value_json(&v)}),
        Ok(ExecutionOutcome::Failed(v)) => json!({"outcome": "failed", "value": value_json(&v)}),
        Ok(ExecutionOutcome::Continued) => json!({
            "outcome": "continued",
            "globals": value_json(&Value::Record(Arc::new(state.globals().clone()))),
        }),
        Err(err) => json!({"outcome": "runtime_error", "kind": runtime_kind(&err), "message": err.to_string()}),
    };
    let obj = out.as_object_mut().unwrap();
    obj.insert("prints".into(), json!(prints));
    obj.insert("calls".into(), json!(calls));
    obj.insert("events".into(), json!(events));
    out
}

fn request_parts(req: &Json) -> (String, serde_json::Map<String, Json>, Json) {
    let source = req.get("source").and_then(Json::as_str).unwrap_or("").to_string();
    let stubs = req
        .get("stubs")
        .and_then(Json::as_object)
        .cloned()
        .unwrap_or_default();
    let signals = req.get("signals").cloned().unwrap_or(Json::Null);
    (source, stubs, signals)
}

fn main() {
    // keep panics quiet on stderr: they are reported as outcomes
    std::panic::set_hook(Box::new(|_| {}));
    let args: Vec<String> = std::env::args().collect();
    // big stack: deeply nested programs recurse in the parser/compiler
    let child = std::thread::Builder::new()
        .stack_size(256 * 1024 * 1024)
        .spawn(move || real_main(args))
        .expect("spawn");
    let code = child.join().unwrap_or(2);
    std::process::exit(code);
}

fn real_main(args: Vec<String>) -> i32 {
    if args.len() >= 2 && args[1] == "--serve" {
        let stdin = std::io::stdin();
        let stdout = std::io::stdout();
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            if line.trim().is_empty() {
                continue;
            }
            let out = match serde_json::from_str::<Json>(&line) {
                Ok(req) => {
                    let (source, stubs, signals) = request_parts(&req);
                    run_program(&source, stubs, &signals)
                }
                Err(err) => json!({"outcome": "harness_error", "message": err.to_string()}),
            };
            let mut lock = stdout.lock();
            let _ = writeln!(lock, "{}", out);
            let _ = lock.flush();
        }
        return 0;
    }
    if args.len() < 2 {
        eprintln!("usage: lash-diff-runner PROGRAM.lash [HOST.json] | --serve");
        return 2;
    }
    let source = match std::fs::read_to_string(&args[1]) {
        Ok(s) => s,
        Err(err) => {
            eprintln!("cannot read {}: {err}", args[1]);
            return 2;
        }
    };
    let host = if args.len() >= 3 {
        let text = std::fs::read_to_string(&args[2]).expect("read host json");
        serde_json::from_str::<Json>(&text).expect("host json")
    } else {
        Json::Null
    };
    let stubs = host.get("stubs").and_then(Json::as_object).cloned().unwrap_or_default();
    let signals = host.get("signals").cloned().unwrap_or(Json::Null);
    println!("{}", run_program(&source, stubs, &signals));
    0
}
