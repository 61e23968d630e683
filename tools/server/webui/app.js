// app.js: the chat page's behaviour. One conversation kept in the page; each
// turn is a streaming POST /v1/chat/completions (the whole conversation, so the
// server's session cache reuses the committed prefix), read as server-sent
// events: delta.reasoning_content goes into a folded "thinking" box,
// delta.content into the answer, and with "live denoising" on the request asks
// for stream_options.clover_passes, whose events (chunk.clover.pass) redraw the
// block being resolved: one row of cells per block, filled in as rows are fixed.
"use strict";

const $ = (id) => document.getElementById(id);
const conversation = []; // {role, content, reasoning_content}
let controller = null;

// The API key lives in sessionStorage only (gone when the tab closes).
$("apikey").value = sessionStorage.getItem("clover-api-key") || "";
$("apikey").addEventListener("change", () => sessionStorage.setItem("clover-api-key", $("apikey").value));

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("apikey").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

async function loadModel() {
  try {
    const r = await fetch("/v1/models", { headers: headers() });
    if (!r.ok) { $("model").textContent = r.status === 401 ? "(enter the API key)" : ""; return; }
    const j = await r.json();
    if (j.data && j.data.length) $("model").textContent = j.data[0].id;
  } catch (e) { $("model").textContent = ""; }
}
$("apikey").addEventListener("change", loadModel);

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  if (text !== undefined) div.textContent = text;
  $("messages").appendChild(div);
  div.scrollIntoView({ block: "end" });
  return div;
}

// The assistant's bubble: a folded thinking box, the answer, a line of figures.
function assistantBubble() {
  const div = addMessage("assistant");
  const details = document.createElement("details");
  const summary = document.createElement("summary");
  summary.textContent = "thinking";
  const thought = document.createElement("div");
  details.append(summary, thought);
  details.hidden = true;
  const answer = document.createElement("div");
  answer.className = "answer";
  const meta = document.createElement("div");
  meta.className = "meta";
  div.append(details, answer, meta);
  return { div, details, thought, answer, meta };
}

function num(id, parse) {
  const v = $(id).value.trim();
  if (v === "") return undefined;
  const x = parse(v);
  return Number.isFinite(x) ? x : undefined;
}

function requestBody() {
  const body = {
    messages: conversation.map((m) => ({ role: m.role, content: m.content })),
    stream: true,
    stream_options: { include_usage: true },
    chat_template_kwargs: { enable_thinking: $("thinking").checked },
  };
  if ($("showpasses").checked) body.stream_options.clover_passes = true;
  const fields = { max_tokens: parseInt, temperature: parseFloat, top_k: parseInt, top_p: parseFloat,
                   seed: parseInt, threshold: parseFloat };
  for (const [k, p] of Object.entries(fields)) {
    const v = num(k, p);
    if (v !== undefined) body[k] = v;
  }
  // block diffusion's decoding rule: left out (the model's record) unless one is picked
  if ($("rule").value) body.rule = $("rule").value;
  return body;
}

// ---- the live denoising view ----
const denoise = { blocks: new Map(), t0: 0, fixed: 0, passes: 0 };

function resetDenoise() {
  denoise.blocks.clear();
  denoise.t0 = 0;
  denoise.fixed = 0;
  denoise.passes = 0;
  $("denoise").textContent = "";
}

// A readable glyph for a token's text in a small cell.
function glyph(t) {
  return t.replace(/\n/g, "\u21b5").replace(/\t/g, "\u2192").replace(/ /g, "\u00b7")
          .replace(/[\x00-\x1f\x7f]/g, (c) => "^" + String.fromCharCode((c.charCodeAt(0) + 64) & 127));
}

function onPass(p) {
  if (!denoise.t0) denoise.t0 = performance.now();
  let b = denoise.blocks.get(p.block);
  if (!b) {
    const el = document.createElement("div");
    el.className = "block";
    const head = document.createElement("div");
    head.className = "head";
    const cells = document.createElement("div");
    cells.className = "cells";
    const list = [];
    for (let i = 0; i < p.block_size; i++) {
      const c = document.createElement("span");
      c.className = "cell";
      c.textContent = "\u00a0";
      cells.appendChild(c);
      list.push(c);
    }
    el.append(head, cells);
    $("denoise").appendChild(el);
    b = { el, head, list, passes: 0 };
    denoise.blocks.set(p.block, b);
  }
  p.rows.forEach((t, i) => {
    const c = b.list[i];
    if (t === null || c === undefined) return;
    if (!c.classList.contains("fixed")) {
      c.classList.add("fixed", "new");
      c.textContent = glyph(t) || "\u00a0";
      c.title = JSON.stringify(t);
    } else {
      c.classList.remove("new");
    }
  });
  if (p.pass > 0) {
    b.passes = p.pass;
    denoise.passes++;
    denoise.fixed += p.n_fixed_now;
  }
  const secs = (performance.now() - denoise.t0) / 1000;
  const perPass = b.passes ? (p.n_fixed / b.passes).toFixed(2) : "-";
  const rate = secs > 0 ? (denoise.fixed / secs).toFixed(1) : "-";
  b.head.textContent = `block ${p.block}: pass ${p.pass}, ${p.n_fixed}/${p.block_size} fixed, ` +
                       `${perPass} tokens/pass, ${rate} tok/s`;
}

// ---- sending ----
async function send(text) {
  conversation.push({ role: "user", content: text });
  addMessage("user", text);
  const bubble = assistantBubble();
  resetDenoise();
  $("send").disabled = true;
  $("stop").disabled = false;
  controller = new AbortController();
  let reasoning = "", content = "", figures = null, finish = "";
  try {
    const r = await fetch("/v1/chat/completions", { method: "POST", headers: headers(),
                                                     body: JSON.stringify(requestBody()), signal: controller.signal });
    if (!r.ok) {
      let msg = r.status + " " + r.statusText;
      try { msg = (await r.json()).error.message; } catch (e) { /* not JSON */ }
      throw new Error(msg);
    }
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const ev = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        for (const line of ev.split("\n")) {
          if (!line.startsWith("data: ")) continue;
          const data = line.slice(6);
          if (data === "[DONE]") continue;
          const chunk = JSON.parse(data);
          if (chunk.error) throw new Error(chunk.error.message);
          if (chunk.clover && chunk.clover.pass) { onPass(chunk.clover.pass); continue; }
          if (chunk.clover) figures = chunk.clover;
          const ch = chunk.choices && chunk.choices[0];
          if (!ch) continue;
          if (ch.finish_reason) finish = ch.finish_reason;
          const d = ch.delta || {};
          if (d.reasoning_content) {
            reasoning += d.reasoning_content;
            bubble.details.hidden = false;
            bubble.thought.textContent = reasoning;
          }
          if (d.content) {
            content += d.content;
            bubble.answer.textContent = content;
          }
          bubble.div.scrollIntoView({ block: "end" });
        }
      }
    }
    bubble.meta.textContent = finish ? "finish: " + finish : "";
  } catch (e) {
    if (e.name === "AbortError") {
      bubble.meta.textContent = "stopped";
    } else {
      bubble.div.classList.add("error");
      bubble.answer.textContent = (content ? content + "\n" : "") + "error: " + e.message;
    }
  } finally {
    conversation.push({ role: "assistant", content, reasoning_content: reasoning });
    if (figures) {
      const f = figures;
      const line = `${f.mode}, ${f.prompt_tokens} prompt tokens (${f.reused_tokens} reused), ` +
                   `${f.passes} passes, ${f.blocks} blocks, ` +
                   // the server reports causal_steps only when the causal rule took some rows
                   (f.causal_steps ? `${f.causal_steps} causal steps, ` : "") +
                   `${f.tokens_per_second.toFixed(1)} tok/s, ` +
                   `${f.total_s.toFixed(2)} s`;
      bubble.meta.textContent += (bubble.meta.textContent ? " \u00b7 " : "") + line;
      $("stats").textContent = line;
    }
    bubble.div.dataset.done = "1";
    controller = null;
    $("send").disabled = false;
    $("stop").disabled = true;
  }
}

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("prompt").value.trim();
  if (!text || controller) return;
  $("prompt").value = "";
  send(text);
});
$("prompt").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    $("composer").requestSubmit();
  }
});
$("stop").addEventListener("click", () => { if (controller) controller.abort(); });
$("clear").addEventListener("click", () => {
  if (controller) controller.abort();
  conversation.length = 0;
  $("messages").textContent = "";
  resetDenoise();
  $("stats").textContent = "";
});
loadModel();
