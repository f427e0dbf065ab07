//! Progress display: a bar on a terminal, plain lines otherwise, nothing with --json.

use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Quiet,
    Lines,
    Bar,
}

pub struct Progress {
    mode: Mode,
    total: usize,
    done: usize,
    bar: Option<indicatif::ProgressBar>,
}

fn summary(status: &str, result: &Value) -> String {
    let mut s = status.to_string();
    if let Some(ms) = result.get("median_ms").and_then(Value::as_f64) {
        s.push_str(&format!(", median {ms:.3} ms"));
    }
    if let Some(r) = result
        .get("reasons")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str)
    {
        let r: String = r.chars().take(160).collect();
        s.push_str(&format!(": {r}"));
    }
    s
}

impl Progress {
    pub fn new(mode: Mode, total: usize) -> Self {
        let bar = (mode == Mode::Bar).then(|| {
            let b = indicatif::ProgressBar::new(total as u64);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {wide_msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b
        });
        Progress {
            mode,
            total,
            done: 0,
            bar,
        }
    }

    fn line(&self, text: String) {
        match (&self.bar, self.mode) {
            (Some(b), _) => b.println(text),
            (None, Mode::Lines) => eprintln!("{text}"),
            _ => {}
        }
    }

    pub fn started(&mut self, id: &str, reason: &str) {
        if let Some(b) = &self.bar {
            b.set_message(id.to_string());
        } else {
            self.line(format!(
                "[{}/{}] run    {id} ({reason})",
                self.done + 1,
                self.total
            ));
        }
    }

    pub fn settled(&mut self, id: &str, status: &str, how: &str) {
        self.done += 1;
        if let Some(b) = &self.bar {
            b.inc(1);
        }
        if how != "cached" || self.mode == Mode::Lines && self.total <= 20 {
            self.line(format!(
                "[{}/{}] {how:6} {id}: {status}",
                self.done, self.total
            ));
        }
    }

    pub fn finished(&mut self, id: &str, status: &str, ms: f64, result: &Value) {
        self.done += 1;
        if let Some(b) = &self.bar {
            b.inc(1);
        }
        self.line(format!(
            "[{}/{}] done   {id}: {} ({:.1} s)",
            self.done,
            self.total,
            summary(status, result),
            ms / 1e3
        ));
    }

    pub fn done(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}
