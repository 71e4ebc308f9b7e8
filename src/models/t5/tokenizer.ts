import { z } from 'zod';

/**
 * Tokenizer file: a word vocabulary with byte fallback, in the spirit of SentencePiece's byte fallback (Kudo &
 * Richardson 2018). Ids: 0 pad, 1 eos (`</s>`), 2 unk, 3..258 the 256 UTF-8 bytes, then the words.
 */
export const TokenizerFileSchema = z.strictObject({
  type: z.literal('word-bytes'),
  words: z.array(z.string().min(1).max(64).regex(/^[a-z0-9]+$/)).max(1 << 20),
});
export type TokenizerFile = z.infer<typeof TokenizerFileSchema>;

export const PAD_ID = 0;
export const EOS_ID = 1;
const BYTE_BASE = 3;
const WORD_BASE = BYTE_BASE + 256;

/** Token ids `[maxLength]` (padded with PAD_ID) and the number of real tokens (including eos). */
export interface Encoded {
  ids: Int32Array;
  length: number;
}

export class WordByteTokenizer {
  private readonly index: ReadonlyMap<string, number>;

  constructor(readonly file: TokenizerFile) {
    const m = new Map<string, number>();
    file.words.forEach((w, i) => {
      if (!m.has(w)) m.set(w, WORD_BASE + i);
    });
    this.index = m;
  }

  /** Number of ids the embedding table must cover. */
  get vocabSize(): number {
    return WORD_BASE + this.file.words.length;
  }

  /**
   * Lower-cases `text`, splits it into runs of letters/digits and single other characters (spaces dropped),
   * maps known words to their id and everything else to UTF-8 byte ids, appends eos, and truncates/pads to
   * `maxLength` (the eos is kept when truncating).
   */
  encode(text: string, maxLength: number): Encoded {
    const ids: number[] = [];
    const pieces = text.normalize('NFKC').toLowerCase().match(/[a-z0-9]+|[^\sa-z0-9]/gu) ?? [];
    for (const piece of pieces) {
      const id = this.index.get(piece);
      if (id !== undefined) {
        ids.push(id);
      } else {
        for (const byte of Buffer.from(piece, 'utf8')) ids.push(BYTE_BASE + byte);
      }
    }
    const body = ids.slice(0, maxLength - 1);
    body.push(EOS_ID);
    const out = new Int32Array(maxLength).fill(PAD_ID);
    out.set(body);
    return { ids: out, length: body.length };
  }
}
