/**
 * Example inputs the file does not give: one input box per parameter, offering what the user
 * gave this function last time (kept in the workspace state), else a sensible default.
 */

import * as vscode from "vscode";
import type { Param } from "./python";
import { DEFAULT_INPUT, validInput } from "./snippet";

const KEY = "kernelscope.inputs";

type Remembered = Record<string, Record<string, string>>;

/** The specs for `params` of the function `key`, or null when the user cancels. */
export async function askInputs(memento: vscode.Memento, key: string, label: string, params: Param[]):
  Promise<string[] | null> {
  const all = memento.get<Remembered>(KEY, {});
  const before = all[key] ?? {};
  const answers: string[] = [];
  for (const [i, p] of params.entries()) {
    const value = await vscode.window.showInputBox({
      title: `Kernelscope: example inputs for ${label} (${i + 1}/${params.length})`,
      prompt: `${p.name}: dtype[shape] (a random tensor, e.g. float32[128, 1024], int64[16], bool[8]) or a Python expression`,
      value: before[p.name] ?? DEFAULT_INPUT,
      ignoreFocusOut: true,
      validateInput: validInput,
    });
    if (value === undefined) return null;
    answers.push(value.trim());
  }
  all[key] = Object.fromEntries(params.map((p, i) => [p.name, answers[i]]));
  await memento.update(KEY, all);
  return answers;
}
