"""Text people say, for synthesized training speech: everyday sentences and
sentences with numbers, dates, times, money and names.

  wordnet   the example sentences of WordNet 3.0 (Debian's wordnet-base,
            /usr/share/wordnet/data.*; WordNet licence, BSD-style, Princeton
            University): short everyday English ("Pepper makes me sneeze.")
  numbers   sentences generated here from templates, names and places written
            for this file; each is a pair (written, spoken): the target is
            written the way Whisper's English models write it ("$25", "3:30",
            "March 5, 1987", "40%"), the synthesizer reads the spoken form
            ("twenty five dollars", ...), because espeak-ng reads "$25" as
            "dollar twenty five" and phone numbers as hundreds.

A pair is stored as one line "written<TAB>spoken"; a plain sentence is read as
it is written.
"""
import os
import random
import re

WORDNET_DIR = "/usr/share/wordnet"

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
         "fourteen fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = [(10 ** 12, "trillion"), (10 ** 9, "billion"), (10 ** 6, "million"),
           (1000, "thousand")]
_ORD = {"one": "first", "two": "second", "three": "third", "five": "fifth",
        "eight": "eighth", "nine": "ninth", "twelve": "twelfth"}

NAMES = ("James Mary John Patricia Robert Jennifer Michael Linda David Elizabeth William "
         "Barbara Richard Susan Joseph Jessica Thomas Sarah Charles Karen Daniel Nancy "
         "Matthew Lisa Anthony Betty Mark Sandra Paul Ashley Steven Emily Andrew Donna "
         "Kevin Michelle Brian Carol George Amanda Edward Melissa Ronald Deborah Timothy "
         "Laura Jason Rebecca Ryan Sharon Jacob Cynthia Gary Kathleen Nicholas Amy Eric "
         "Angela Jonathan Anna Larry Ruth Justin Brenda Scott Pamela Frank Nicole Raymond "
         "Samantha Gregory Katherine Samuel Christine Benjamin Emma Patrick Catherine "
         "Jack Olivia Dennis Maria Jerry Heather Alexander Diane Tyler Julie Aaron Joyce "
         "Henry Victoria Peter Kelly Adam Lauren Carlos Rosa Ahmed Fatima Wei Priya "
         "Raj Yuki Kenji Olga Ivan Sofia Luca Pierre Hans Ingrid Kwame Amara Diego").split()
SURNAMES = ("Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez "
            "Wilson Anderson Taylor Thomas Moore Jackson Martin Lee Thompson White Harris "
            "Clark Lewis Robinson Walker Young Allen King Wright Scott Hill Green Adams "
            "Baker Nelson Carter Mitchell Roberts Turner Phillips Campbell Parker Evans "
            "Edwards Collins Stewart Morris Murphy Cook Rogers Morgan Cooper Peterson "
            "Reed Bailey Bell Kelly Howard Ward Cox Richardson Wood Watson Brooks Bennett "
            "Gray Hughes Price Sanders Patel Nguyen Kim Chen Singh Kowalski Muller").split()
PLACES = ["London", "Paris", "Boston", "Chicago", "Dallas", "Denver", "Seattle", "Miami",
          "Atlanta", "Phoenix", "Houston", "Toronto", "Sydney", "Dublin", "Berlin", "Madrid",
          "Rome", "Tokyo", "Delhi", "Cairo", "Lagos", "Nairobi", "Lima", "Mexico City",
          "New York", "Los Angeles", "San Francisco", "Washington", "Oregon", "Texas", "Ohio",
          "Florida", "Canada", "Australia", "Ireland", "Scotland", "India", "Japan", "Brazil",
          "Kenya"]
MONTHS = ("January February March April May June July August September October November "
          "December").split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
THINGS = ("apples eggs books tickets boxes chairs cars dogs cats emails messages students "
          "people pages minutes hours dollars miles bottles cups houses friends songs "
          "questions days weeks children").split()
DEPTS = ("sales support billing accounts the operator reservations customer service "
         "technical support the front desk").split(" ")


def words(n):
    """Spoken cardinal of a non-negative integer (no 'and': 'one hundred five');
    eval.py's normalizer writes numbers with it too."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else " " + _ONES[n % 10])
    if n < 1000:
        r = n % 100
        return _ONES[n // 100] + " hundred" + ("" if r == 0 else " " + words(r))
    for value, name in _SCALES:
        if n >= value:
            if n // value >= 1000 and value == _SCALES[0][0]:
                break  # beyond trillions: say the digits
            r = n % value
            return words(n // value) + " " + name + ("" if r == 0 else " " + words(r))
    return " ".join(_ONES[int(d)] for d in str(n))


def ordinal(n):
    w = words(n).split()
    last = w[-1]
    last = _ORD.get(last, last[:-1] + "ieth" if last.endswith("y") else last + "th")
    return " ".join(w[:-1] + [last])


def ordinal_written(n):
    suf = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return "%d%s" % (n, suf)


def year_words(y):
    if 2000 <= y < 2010:
        return words(y)
    hi, lo = divmod(y, 100)
    if lo == 0:
        return words(hi) + " hundred"
    return words(hi) + " " + ("oh " + _ONES[lo] if lo < 10 else words(lo))


def digits_words(s):
    return " ".join("zero" if d == "0" else _ONES[int(d)] for d in s)


def count(rng, lo=2, hi=99):
    """(written, spoken) of a count: small ones as words, as people write them."""
    n = rng.randint(lo, hi)
    return (words(n) if n < 10 else str(n)), words(n)


def _t(rng):
    """One generated (written, spoken) sentence."""
    name = rng.choice(NAMES)
    who = name if rng.random() < 0.6 else name + " " + rng.choice(SURNAMES)
    place = rng.choice(PLACES)
    k = rng.randrange(22)
    if k == 0:
        m, d, y = rng.choice(MONTHS), rng.randint(1, 28), rng.randint(1920, 2025)
        w = "%s was born on %s %d, %d." % (who, m, d, y)
        s = "%s was born on %s %s, %s." % (who, m, ordinal(d), year_words(y))
    elif k == 1:
        h, mm = rng.randint(1, 12), rng.choice([0, 5, 10, 15, 20, 30, 40, 45, 50])
        ap = rng.choice(["in the morning", "in the afternoon", "tonight", ""])
        if mm == 0:
            w = "The meeting starts at %d o'clock%s." % (h, " " + ap if ap else "")
            s = "The meeting starts at %s o'clock%s." % (words(h), " " + ap if ap else "")
        else:
            w = "The meeting starts at %d:%02d%s." % (h, mm, " " + ap if ap else "")
            s = "The meeting starts at %s %s%s." % (words(h), ("oh " + words(mm)) if mm < 10
                                                     else words(mm), " " + ap if ap else "")
    elif k == 2:
        d = rng.randint(1, 999)
        if rng.random() < 0.5:
            w, s = "It costs $%d." % d, "It costs %s dollars." % words(d)
        else:
            c = rng.randint(1, 99)
            w = "The total comes to $%d.%02d." % (d, c)
            s = "The total comes to %s dollars and %s cents." % (words(d), words(c))
    elif k == 3:
        cw, cs = count(rng)
        t = rng.choice(THINGS)
        w, s = "%s has %s %s." % (who, cw, t), "%s has %s %s." % (who, cs, t)
    elif k == 4:
        p = rng.randint(2, 99)
        g = rng.choice(["people", "voters", "students", "customers", "families"])
        w = "About %d%% of the %s said yes." % (p, g)
        s = "About %s percent of the %s said yes." % (words(p), g)
    elif k == 5:
        a = "%03d" % rng.randint(200, 999)
        b = "%04d" % rng.randint(0, 9999)
        w = "Please call me at %s-%s." % (a, b)
        s = "Please call me at %s, %s." % (digits_words(a), digits_words(b))
    elif k == 6:
        d = rng.randint(0, 9)
        dep = rng.choice(DEPTS)
        w = "For %s, press %s." % (dep, words(d))
        s = w
    elif k == 7:
        n, g = rng.randint(100, 9999), rng.randint(1, 60)
        w = "Flight %d to %s leaves from gate %d." % (n, place, g)
        s = "Flight %s to %s leaves from gate %s." % (words(n), place, words(g))
    elif k == 8:
        y = rng.randint(1850, 2025)
        w = "In %d, %s moved to %s." % (y, who, place)
        s = "In %s, %s moved to %s." % (year_words(y), who, place)
    elif k == 9:
        n = rng.randint(2, 105)
        w = "The temperature dropped to %d degrees last night." % n
        s = "The temperature dropped to %s degrees last night." % words(n)
    elif k == 10:
        a = rng.randint(2, 90)
        w = "%s turned %d last %s." % (name, a, rng.choice(DAYS))
        s = w.replace(" %d " % a, " %s " % words(a))
    elif k == 11:
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        w = "The final score was %d to %d." % (a, b)
        s = "The final score was %s to %s." % (words(a), words(b))
    elif k == 12:
        f = rng.randint(2, 40)
        w = "Your room is on the %s floor." % (ordinal(f) if f < 10 else ordinal_written(f))
        s = "Your room is on the %s floor." % ordinal(f)
    elif k == 13:
        n = rng.randint(1000, 99999)
        w = "We sold %s cars this year." % format(n, ",")
        s = "We sold %s cars this year." % words(n)
    elif k == 14:
        w = "Hi %s, how are you doing today?" % name
        s = w
    elif k == 15:
        cw, cs = count(rng, 2, 12)
        w = "Can you pick up %s eggs on your way home?" % cw
        s = "Can you pick up %s eggs on your way home?" % cs
    elif k == 16:
        w = "Thanks, %s. See you on %s." % (name, rng.choice(DAYS))
        s = w
    elif k == 17:
        n = rng.randint(2, 59)
        w = "I'll be there in %d minutes." % n
        s = "I'll be there in %s minutes." % words(n)
    elif k == 18:
        n = rng.randint(1, 300)
        st = rng.choice(["Main Street", "Oak Avenue", "Park Road", "High Street", "Elm Street"])
        w = "%s lives at %d %s in %s." % (who, n, st, place)
        s = "%s lives at %s %s in %s." % (who, words(n), st, place)
    elif k == 19:
        n = "".join(rng.choice("0123456789") for _ in range(rng.choice([4, 5, 6])))
        w = "Your confirmation number is %s." % n
        s = "Your confirmation number is %s." % digits_words(n)
    elif k == 20:
        m, d = rng.choice(MONTHS), rng.randint(1, 31)
        w = "The deadline is %s %s." % (m, ordinal_written(d))
        s = "The deadline is %s %s." % (m, ordinal(d))
    else:
        a, b = rng.randint(2, 12), rng.randint(2, 12)
        w = "%d times %d is %d." % (a, b, a * b)
        s = "%s times %s is %s." % (words(a), words(b), words(a * b))
    return w, s


def number_sentences(n=40000, seed=7):
    rng = random.Random(seed)
    seen, out = set(), []
    while len(out) < n and len(seen) < n * 3:
        w, s = _t(rng)
        if w in seen:
            continue
        seen.add(w)
        out.append(w if w == s else w + "\t" + s)
    return out


def wordnet_sentences():
    out = []
    for pos in ("noun", "verb", "adj", "adv"):
        p = os.path.join(WORDNET_DIR, "data." + pos)
        if not os.path.exists(p):
            continue
        with open(p, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("  "):
                    continue  # licence header
                for q in re.findall(r'"([^"]+)"', line.split("|", 1)[-1]):
                    q = " ".join(q.split()).strip(" ;,")
                    if not re.match(r"^[A-Za-z0-9 ,.;:!?'$%-]+$", q) or "--" in q:
                        continue
                    n = len(q.split())
                    if n < 4 or n > 30 or re.search(r"\b[A-Z]{2,}\b", q):
                        continue
                    q = q[0].upper() + q[1:]
                    if q[-1] not in ".!?":
                        q += "."
                    out.append(q)
    return sorted(set(out))


def spoken(t):
    """The text a synthesizer reads for a stored line."""
    return t.split("\t", 1)[1] if "\t" in t else t


def written(t):
    """The target text of a stored line."""
    return t.split("\t", 1)[0]
