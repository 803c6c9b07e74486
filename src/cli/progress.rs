//! Progress of downloads and long local work: bars on a terminal
//! (indicatif), plain lines in a pipe (at most one every two seconds per
//! kind of work, and one when it ends).

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;

use debforge::fetch::{Event, Observer, Task};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Progress {
    bars: Option<Bars>,
    /// Per kind of local work: its bar (terminal) and when a line was last
    /// printed for it (pipe).
    work: Mutex<HashMap<Task, (Option<ProgressBar>, std::time::Instant)>>,
}

struct Bars {
    multi: MultiProgress,
    files: Mutex<HashMap<String, (ProgressBar, u64)>>,
    total: ProgressBar,
}

impl Progress {
    /// Bars when stderr is a terminal, lines otherwise.
    pub fn new() -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress {
                bars: None,
                work: Mutex::new(HashMap::new()),
            };
        }
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let total = multi.add(ProgressBar::new(0));
        total.set_style(
            ProgressStyle::with_template(
                "{prefix:>12} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}",
            )
            .expect("template")
            .progress_chars("=> "),
        );
        total.set_prefix("total");
        Progress {
            work: Mutex::new(HashMap::new()),
            bars: Some(Bars {
                multi,
                files: Mutex::new(HashMap::new()),
                total,
            }),
        }
    }

    /// Whether bars are drawn (a terminal): only then is the total worth computing.
    pub fn has_bars(&self) -> bool {
        self.bars.is_some()
    }

    /// The bytes about to be downloaded, for the total bar.
    pub fn expect_total(&self, bytes: u64) {
        if let Some(b) = &self.bars {
            b.total.set_length(bytes);
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bars {
            b.total.finish_and_clear();
            let _ = b.multi.clear();
        }
    }

    fn line(&self, text: &str) {
        match &self.bars {
            Some(b) => {
                let _ = b.multi.println(text);
            }
            None => {
                let _ = writeln!(std::io::stderr().lock(), "{text}");
            }
        }
    }
}

impl Progress {
    fn work(&self, task: Task, done: u64, total: u64, item: &str) {
        let mut work = self.work.lock().expect("work");
        let finished = done >= total;
        let label = task.label();
        match &self.bars {
            Some(b) => {
                let (bar, _) = work.entry(task).or_insert_with(|| {
                    let bar = b.multi.insert_before(&b.total, ProgressBar::new(total));
                    bar.set_style(
                        ProgressStyle::with_template(
                            "{prefix:>12} [{bar:30}] {pos}/{len} {msg:40!}",
                        )
                        .expect("template")
                        .progress_chars("=> "),
                    );
                    bar.set_prefix(label);
                    (Some(bar), std::time::Instant::now())
                });
                if let Some(bar) = bar {
                    bar.set_length(total);
                    bar.set_position(done);
                    bar.set_message(item.to_string());
                }
                if finished && let Some((Some(bar), _)) = work.remove(&task) {
                    bar.finish_and_clear();
                }
            }
            None => {
                let now = std::time::Instant::now();
                let due = match work.get(&task) {
                    None => true,
                    Some((_, last)) => now.duration_since(*last).as_secs() >= 2,
                };
                if finished {
                    work.remove(&task);
                    drop(work);
                    self.line(&format!("{label}: {total} of {total} done"));
                } else if due {
                    work.insert(task, (None, now));
                    drop(work);
                    self.line(&format!("{label}: {done} of {total} done, now {item}"));
                }
            }
        }
    }
}

impl Observer for Progress {
    fn event(&self, event: Event) {
        match event {
            Event::Start {
                name,
                total,
                resumed_from,
            } => {
                let from = if resumed_from > 0 {
                    format!(", resuming at {resumed_from}")
                } else {
                    String::new()
                };
                match &self.bars {
                    Some(b) => {
                        let bar = b.multi.insert_before(&b.total, ProgressBar::new(total));
                        bar.set_style(
                            ProgressStyle::with_template(
                                "{msg:40!} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}",
                            )
                            .expect("template")
                            .progress_chars("=> "),
                        );
                        bar.set_message(name.clone());
                        bar.set_position(resumed_from);
                        b.total.inc(resumed_from);
                        b.files
                            .lock()
                            .expect("bars")
                            .insert(name, (bar, resumed_from));
                    }
                    None => self.line(&format!("fetching {name} ({total} bytes{from})")),
                }
            }
            Event::Progress { name, bytes } => {
                if let Some(b) = &self.bars
                    && let Some((bar, last)) = b.files.lock().expect("bars").get_mut(&name)
                {
                    bar.set_position(bytes);
                    b.total.inc(bytes.saturating_sub(*last));
                    *last = bytes;
                }
            }
            Event::Done { name } => match &self.bars {
                Some(b) => {
                    if let Some((bar, _)) = b.files.lock().expect("bars").remove(&name) {
                        bar.finish_and_clear();
                    }
                    self.line(&format!("fetched {name}"));
                }
                None => self.line(&format!("fetched {name}")),
            },
            Event::Cached { name } => self.line(&format!(
                "cached  {name} (verified earlier; its source was not read again)"
            )),
            Event::Copied { name, from } => self.line(&format!("copied  {name} from {from}")),
            Event::Warning { message } => self.line(&format!("warning: {message}")),
            Event::Carried {
                package,
                suffix,
                follows,
            } => self.line(&format!(
                "{package}: {suffix}, follows {follows} (it depends on that exact version)"
            )),
            Event::Work {
                task,
                done,
                total,
                item,
            } => self.work(task, done, total, &item),
            Event::Retry {
                name,
                attempt,
                reason,
                wait,
            } => self.line(&format!(
                "retrying {name} in {:.1}s (attempt {attempt}): {reason}",
                wait.as_secs_f64()
            )),
        }
    }
}
