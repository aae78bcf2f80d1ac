"""Snakemake's report.html looked at in a browser (tests/chromium.py), as a person clicks through it.

The report is a React app: its results are listed only after a click on their category in the
navigation bar (and on the subcategory when the category has several), and a plot is shown, as an
<img> beside the bar, only after a click on its row's eye button. `view_results` does those clicks
and reports, for each row, what the browser shows.
"""

import json

# One async function: click the category (and subcategory), then each row's eye button in turn, and
# wait for the shown image to change and load. For each row: its labels, the image's natural and
# shown size, whether it is visible (styles, inside the window) and on top (what the browser finds
# at the image's centre is the image, not something over it).
VIEW_RESULTS_JS = r"""
(async (category, subcategory) => {
  const sleep = ms => new Promise(done => setTimeout(done, ms));
  async function until(test, what, ms = 15000) {
    const end = Date.now() + ms;
    for (;;) {
      const value = test();
      if (value) return value;
      if (Date.now() > end) throw new Error("timed out waiting for " + what);
      await sleep(50);
    }
  }
  const link = text => [...document.querySelectorAll("nav a")].find(a => a.textContent.trim() === text);
  const rows = () => [...document.querySelectorAll("nav table tbody tr")];
  const shown = () => [...document.querySelectorAll("img")].find(img => !img.closest("nav"));
  (await until(() => link(category), "the category " + category)).click();
  await sleep(100);
  const sub = link(subcategory);   // absent when the category has one subcategory: its table is shown
  if (sub) sub.click();
  const count = (await until(() => rows().length && rows(), "the results table")).length;
  const views = [];
  let before = null;
  for (let i = 0; i < count; i++) {
    const row = rows()[i];   // looked up again: React renders the table anew after each click
    const labels = [...row.querySelectorAll("td")].slice(0, -1).map(td => td.textContent.trim());
    row.querySelector("td:last-child a").click();
    const img = await until(() => {
      const img = shown();
      return img && img.src !== before && img.complete && img.naturalWidth > 0 && img;
    }, "the image of " + labels.join(" "));
    before = img.src;
    const box = img.getBoundingClientRect();
    const style = getComputedStyle(img);
    const centre = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
    views.push({
      labels,
      mime: img.src.slice(5, img.src.indexOf(";")),
      naturalWidth: img.naturalWidth, naturalHeight: img.naturalHeight,
      width: box.width, height: box.height,
      visible: style.display !== "none" && style.visibility === "visible" && Number(style.opacity) > 0
               && box.width > 0 && box.height > 0 && box.left < innerWidth && box.top < innerHeight
               && box.right > 0 && box.bottom > 0,
      onTop: centre === img,
    });
  }
  return views;
})
"""


def view_results(browser, category: str, subcategory: str) -> list:
    """Each result row of a category's subcategory, viewed: [{labels, mime, naturalWidth, ...}]."""
    return browser.evaluate(f"{VIEW_RESULTS_JS}({json.dumps(category)}, {json.dumps(subcategory)})")


def report_results(html: str) -> dict:
    """The report's `results` object ({path: {caption, category, labels, data_uri, ...}}), read from
    its source without a browser."""
    script = html.index('<script id="results">')   # the report's own: library code may say "var results" too
    start = html.index("var results = ", script) + len("var results = ")
    return json.JSONDecoder().raw_decode(html, start)[0]
