// The example page: load and verify a manifest, show the k-RR report that will be sent (never
// the true value), send it, show hop 0's receipt. docs/browser-client.md.
import mqtt from 'mqtt';
import * as client from '/src/index.js';

const $ = (id) => document.getElementById(id);
const state = { sodium: null, manifest: null };

function show(id, html, cls = '') {
  const element = $(id);
  element.hidden = false;
  element.className = `box ${cls}`;
  element.innerHTML = html;
}

function escape(text) {
  return String(text).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
}

async function load() {
  try {
    state.sodium ??= await client.sodiumReady();
    const manifest = await client.loadManifest(state.sodium, $('manifest').value, $('coordinator').value.trim());
    state.manifest = manifest;
    $('value').innerHTML = manifest.labels.map((label, i) => `<option value="${i}">${escape(label)}</option>`).join('');
    $('round').innerHTML = manifest.rounds.map((r) => `<option>${r}</option>`).join('');
    for (const id of ['value', 'round', 'send']) $(id).disabled = false;
    show('manifest-info', `Signature verified with the coordinator key <code>${client.toHex(manifest.coordinator).slice(0, 16)}...</code><br>
      ${manifest.k} values, eps0 = ${manifest.eps0} (k-randomized response), ${manifest.hops.length} hops, ${manifest.expected} reports expected<br>
      manifest digest <code>${client.toHex(manifest.digest).slice(0, 32)}...</code>`, 'ok');
  } catch (error) {
    show('manifest-info', `Refused: ${escape(error.message)}`, 'bad');
  }
}

async function send() {
  const m = state.manifest;
  $('send').disabled = true;
  $('receipt').hidden = true;
  const account = $('account').value.trim();
  const process = Number(/^clients-(\d+)$/.exec(account)?.[1] ?? -1);
  try {
    const result = await client.sendOneReport(state.sodium, mqtt, {
      manifest: m, roundId: BigInt($('round').value), process, index: Number($('index').value),
      value: Number($('value').value), keyOfProcess: m.clientAuth ? client.fromHex($('process-key').value.trim(), 32, 'process key') : null,
      brokerUrl: $('broker').value.trim(), username: account, password: $('password').value,
      subprotocols: new URLSearchParams(location.search).getAll('subprotocol'),
      onReport: (report) => show('report', `What is sent (sealed): <b>${escape(m.labels[report])}</b>, the k-randomized
        response of your answer. With eps0 = ${m.eps0} it is your answer with probability
        ${(Math.exp(m.eps0) / (Math.exp(m.eps0) + m.k - 1)).toFixed(3)}, otherwise one of the ${m.k - 1} others at random:
        whoever reads it cannot be sure of your answer.`),
    });
    if (result.accepted === null) {
      show('receipt', 'Sent. This round has no client authentication: hop 0 sends no receipts.', 'ok');
    } else if (result.accepted) {
      show('receipt', `Receipt from hop 0: your report was taken (receipt ${result.seq}${result.closed ? ', final' : ''}).`, 'ok');
    } else {
      show('receipt', 'Receipt from hop 0: its batch closed without your report.', 'bad');
    }
    document.body.dataset.done = 'yes';
  } catch (error) {
    show('receipt', `Not sent: ${escape(error.message)}`, 'bad');
    document.body.dataset.done = 'error';
  } finally {
    $('send').disabled = false;
  }
}

$('load').addEventListener('click', load);
$('send').addEventListener('click', send);
const fromUrl = new URLSearchParams(location.search).get('manifest');
if (fromUrl) fetch(fromUrl).then((r) => r.text()).then((text) => { $('manifest').value = text; });
window.exampleReady = true;
