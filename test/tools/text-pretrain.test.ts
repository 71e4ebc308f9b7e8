/**
 * The text-encoder stage of the training command (tools/train/text_pretrain.py, issue 8): the scene attributes it
 * teaches are those its prompts state, read back here from each prompt's words by the grammar's own pattern; its loss
 * is the cross-entropy checked on a hand-computed case; and a short stage learns the attributes well above chance on
 * held-out prompts. Runs Debian's PyTorch.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { trainPython as python } from '../helpers/train-python';

const ROOT = path.resolve(__dirname, '..', '..');
const PYTHON = '/usr/bin/python3';

// the grammar's words (tools/train/procedural_world.py), in the class order of ATTRIBUTES
const ROOMS = ['dark blue', 'dark green', 'gray', 'black', 'brown'];
const COLORS = ['red', 'green', 'yellow', 'cyan', 'magenta', 'white', 'orange'];
const SQUARE_NOUNS = ['cube', 'square', 'box'];
const DISC_NOUNS = ['ball', 'disc', 'circle', 'dot'];
const COUNTS: Record<string, number> = { a: 1, an: 1, two: 2, three: 3 };
const PROMPT = /^an? (\w+) (\w+) in a (dark blue|dark green|gray|black|brown) room(?: with (an?|two|three) (\w+) blocks?)?$/;

describe('text_pretrain.py', () => {
  it('labels each sampled prompt with the room, agent colour and shape, block count and block colour its words state', () => {
    const out: { prompts: string[]; labels: number[][] } = python(
      'import json, numpy as np, text_pretrain as tp\n' +
        'p, y = tp.sample_prompts(np.random.default_rng(7), 400)\n' +
        'print(json.dumps({"prompts": p, "labels": y.tolist()}))',
    );
    expect(out.prompts).toHaveLength(400);
    const seen = [new Set<number>(), new Set<number>(), new Set<number>(), new Set<number>(), new Set<number>()];
    out.prompts.forEach((prompt, i) => {
      const m = PROMPT.exec(prompt);
      if (!m) throw new Error(`not a prompt of the grammar: ${prompt}`);
      const [, agent, noun, room, count, block] = m;
      expect(SQUARE_NOUNS.includes(noun) || DISC_NOUNS.includes(noun)).toBe(true);
      const want = [
        ROOMS.indexOf(room),
        COLORS.indexOf(agent),
        SQUARE_NOUNS.includes(noun) ? 1 : 0,
        count ? COUNTS[count] : 0,
        block ? 1 + COLORS.indexOf(block) : 0,
      ];
      expect(out.labels[i]).toEqual(want);
      expect(agent).not.toBe(block);
      want.forEach((v, a) => seen[a].add(v));
    });
    // every class of every attribute occurs in 400 draws (the sampler covers the grammar)
    expect(seen.map((s) => s.size)).toEqual([5, 7, 2, 4, 8]);
  });

  it('its loss is the mean over the five attributes of the cross-entropy: ln-class-count each for uniform logits', () => {
    const out: { loss: number; accs: number[] } = python(
      'import json, torch, text_pretrain as tp\n' +
        'labels = torch.tensor([[0, 1, 0, 3, 0], [4, 6, 1, 2, 7]])\n' +
        'logits = [torch.zeros(2, k) for _, k in tp.ATTRIBUTES]\n' +
        "logits[1][0, 1] = 5.0  # the first prompt's agent colour, confidently right\n" +
        'loss, accs = tp.attribute_loss(logits, labels)\n' +
        'print(json.dumps({"loss": loss.item(), "accs": accs}))',
    );
    // uniform logits: ln K per prompt; the confident row: ln(e^5 + 6) - 5 for agent colour
    const agent = (Math.log(7) + (Math.log(Math.exp(5) + 6) - 5)) / 2;
    const want = (Math.log(5) + agent + Math.log(2) + Math.log(4) + Math.log(8)) / 5;
    expect(out.loss).toBeCloseTo(want, 5);
    // argmax of a uniform row is class 0: right where the label is 0
    expect(out.accs).toEqual([0.5, 0.5, 0.5, 0, 0.5]);
  });

  it('a short stage learns every attribute above chance on held-out prompts and keeps the encoder in eval mode', () => {
    const out: { acc: number[]; training: boolean } = python(
      'import json, torch, default_model, text_pretrain as tp\n' +
        'from training_forward import ref\n' +
        'torch.set_num_threads(2); torch.manual_seed(0)\n' +
        't5 = ref.T5EncoderModel(default_model.default_spec()["textEncoder"])\n' +
        'heads = tp.attribute_heads(t5.shared.weight.shape[1], 0)\n' +
        'acc = tp.pretrain_text_encoder(t5, heads, default_model.default_words(), 32, 60, 0, lambda r: None)\n' +
        '# the same heads on the same held-out prompts read what the stage returned\n' +
        'assert tp.held_out_accuracy(t5, heads, default_model.default_words(), 32, 0) == acc\n' +
        'print(json.dumps({"acc": acc, "training": t5.training}))',
    );
    expect(out.training).toBe(false);
    const chance = [1 / 5, 1 / 7, 1 / 2, 1 / 4, 1 / 8];
    out.acc.forEach((a, i) => expect(a).toBeGreaterThan(chance[i] + 0.2));
  }, 120_000);

  it('text_probe.py refuses a missing directory or an ambiguous call by name, and reads every attribute back from a fresh encoder', () => {
    const probe = (args: string[]) =>
      spawnSync(PYTHON, [path.join('tools', 'train', 'text_probe.py'), ...args], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
    const missing = probe(['/nonexistent/omnirx']);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/\/nonexistent\/omnirx\/text_encoder\.safetensors: no such file/);
    for (const args of [[], ['models/omnirx-default', '--random']]) {
      const r = probe(args);
      expect(r.status).toBe(2);
      expect(r.stderr).toMatch(/give a model directory or --random/);
    }
    // a randomly initialised encoder keeps every attribute linearly readable from its mean state (docs/model-card.md)
    const r = probe(['--random']);
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout) as Record<string, Record<string, number>>;
    expect(Object.keys(out)).toEqual(['mean', 'first', 'last']);
    for (const v of Object.values(out.mean)) expect(v).toBeGreaterThanOrEqual(0.99);
  }, 120_000);
});
