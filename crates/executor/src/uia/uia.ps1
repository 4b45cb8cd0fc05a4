# aai-gateway UI Automation runner: the same program for every call. The app, the steps and
# every value arrive as JSON on stdin; nothing here is built from them, so no value can become
# code. Answers one JSON line: {"ok":true,"result":{...}} or {"ok":false,"error":{...}}.
$ErrorActionPreference = 'Stop'
Add-Type -AssemblyName UIAutomationClient, UIAutomationTypes
$in = [Console]::OpenStandardInput()
$buffer = New-Object System.IO.MemoryStream
$in.CopyTo($buffer)
# PowerShell 7.5+ would otherwise turn a text that looks like a date into a date.
$parse = @{}
if ((Get-Command ConvertFrom-Json).Parameters.ContainsKey('DateKind')) { $parse.DateKind = 'String' }
$request = [System.Text.Encoding]::UTF8.GetString($buffer.ToArray()) | ConvertFrom-Json @parse

$AE = [System.Windows.Automation.AutomationElement]
$Children = [System.Windows.Automation.TreeScope]::Children
$All = [System.Windows.Automation.Condition]::TrueCondition
$P = @{
    Invoke = [System.Windows.Automation.InvokePattern]::Pattern
    Toggle = [System.Windows.Automation.TogglePattern]::Pattern
    Expand = [System.Windows.Automation.ExpandCollapsePattern]::Pattern
    Selection = [System.Windows.Automation.SelectionItemPattern]::Pattern
    Value = [System.Windows.Automation.ValuePattern]::Pattern
    Range = [System.Windows.Automation.RangeValuePattern]::Pattern
    Text = [System.Windows.Automation.TextPattern]::Pattern
}
$NodeCap = 5000
$NearAtMost = 20
$script:index = 0
$script:failure = $null
$script:missing = $null

function Write-Reply($reply) {
    $text = ConvertTo-Json -InputObject $reply -Depth 16 -Compress
    $bytes = [System.Text.Encoding]::UTF8.GetBytes($text + "`n")
    $out = [Console]::OpenStandardOutput()
    $out.Write($bytes, 0, $bytes.Length)
    $out.Flush()
}

# Ends the run with an error of this kind.
function Stop-Run($kind, $more) {
    $e = [ordered]@{ kind = $kind; step = $script:index }
    if ($null -ne $more) { foreach ($k in $more.Keys) { $e[$k] = $more[$k] } }
    $script:failure = $e
    throw 'aai-stop'
}

function Get-Children($el) {
    $list = New-Object System.Collections.Generic.List[object]
    try { foreach ($c in $el.FindAll($Children, $All)) { $list.Add($c) } } catch { }
    return , $list
}

function Get-Pattern($el, $pattern) {
    $p = $null
    try { if ($el.TryGetCurrentPattern($pattern, [ref]$p)) { return $p } } catch { }
    return $null
}

function ConvertTo-Key($text) { return ([string]$text -replace '\s', '').ToLowerInvariant() }

# The control type's programmatic name without `ControlType.`: Button, MenuItem, Edit.
function Get-Role($el) { return ([string]$el.Current.ControlType.ProgrammaticName) -replace '^ControlType\.', '' }

# A role matches the programmatic name or the localized one, in any case, spaces aside.
function Test-Role($el, $role) {
    if ($role -eq '*') { return $true }
    $want = ConvertTo-Key $role
    return ($want -eq (ConvertTo-Key (Get-Role $el))) -or ($want -eq (ConvertTo-Key $el.Current.LocalizedControlType))
}

function Test-Segment($el, $seg) {
    if ($null -ne $seg.name) {
        $name = ([string]$el.Current.Name).Trim()
        if (-not [string]::Equals($name, [string]$seg.name, [System.StringComparison]::Ordinal)) { return $false }
    }
    return Test-Role $el $seg.role
}

# What a not-found error lists: elements of the role wanted first, then others with a name.
function Add-Near($el, $seg, $near) {
    $name = ([string]$el.Current.Name).Trim()
    $entry = [ordered]@{ role = (Get-Role $el); name = $name }
    if (Test-Role $el $seg.role) { if ($near.same.Count -lt $NearAtMost) { $near.same.Add($entry) } }
    elseif ($name -ne '' -and $near.other.Count -lt $NearAtMost) { $near.other.Add($entry) }
}

function New-Near {
    return @{ same = (New-Object System.Collections.Generic.List[object]); other = (New-Object System.Collections.Generic.List[object]) }
}

function Get-NearList($near) { return , @(@($near.same) + @($near.other) | Select-Object -First $NearAtMost) }

# The seg.nth element matching seg among $first and their descendants, breadth first.
function Find-Descendant($first, $seg, $near) {
    $queue = New-Object System.Collections.Generic.Queue[object]
    foreach ($e in $first) { $queue.Enqueue($e) }
    $count = 0
    $looked = 0
    while ($queue.Count -gt 0 -and $looked -lt $NodeCap) {
        $el = $queue.Dequeue()
        $looked++
        $hit = $false
        try {
            if (Test-Segment $el $seg) { $count++; $hit = ($count -eq $seg.nth) }
            if (-not $hit) { Add-Near $el $seg $near }
        } catch { continue }
        if ($hit) { return $el }
        foreach ($c in (Get-Children $el)) { $queue.Enqueue($c) }
    }
    return $null
}

function Test-Protected($names) {
    foreach ($n in $names) {
        $lower = ([string]$n).ToLowerInvariant()
        foreach ($p in @($request.protected)) {
            if ($p -and $lower.Contains([string]$p)) { Stop-Run 'protected' @{ pattern = [string]$p } }
        }
    }
}

# The app's top-level windows: those of its processes (by name, `.exe` aside), else those
# titled as it. Refuses a protected one.
function Get-Windows {
    $app = ([string]$request.app).Trim()
    $want = $app -replace '\.exe$', ''
    $ids = @([System.Diagnostics.Process]::GetProcessesByName($want) | ForEach-Object { $_.Id })
    $top = $AE::RootElement.FindAll($Children, $All)
    $found = New-Object System.Collections.Generic.List[object]
    foreach ($w in $top) { try { if ($ids -contains $w.Current.ProcessId) { $found.Add($w) } } catch { } }
    if ($found.Count -eq 0) {
        foreach ($w in $top) { try { if (([string]$w.Current.Name).Trim() -ieq $app) { $found.Add($w) } } catch { } }
    }
    $names = @($app)
    foreach ($w in $found) {
        try { $names += [string]$w.Current.Name; $names += [System.Diagnostics.Process]::GetProcessById($w.Current.ProcessId).ProcessName } catch { }
    }
    Test-Protected $names
    return , $found
}

# The element a step's path names, or $null with $script:missing saying where it stopped.
function Find-Element($step) {
    $first = Get-Windows
    $el = $null
    $at = 0
    foreach ($seg in @($step.segments)) {
        $near = New-Near
        $el = Find-Descendant $first $seg $near
        if ($null -eq $el) {
            $script:missing = [ordered]@{ at = $at; near = (Get-NearList $near) }
            return $null
        }
        $first = Get-Children $el
        $at++
    }
    return $el
}

function Find-OrStop($step) {
    $el = Find-Element $step
    if ($null -eq $el) { Stop-Run 'not_found' @{ path = $step.path; at = $script:missing.at; near = $script:missing.near } }
    return $el
}

function Wait-Step($step) {
    $gone = $step.action -eq 'gone'
    $until = [DateTime]::UtcNow.AddMilliseconds([double]$step.timeout_ms)
    while ($true) {
        $found = $null -ne (Find-Element $step)
        if ($found -ne $gone) { return }
        if ([DateTime]::UtcNow -ge $until) {
            $more = [ordered]@{ path = $step.path; gone = $gone; timeout_ms = $step.timeout_ms }
            if (-not $gone -and $null -ne $script:missing) { $more.at = $script:missing.at; $more.near = $script:missing.near }
            Stop-Run 'timeout' $more
        }
        Start-Sleep -Milliseconds 50
    }
}

# Its text: a value, else a document's text, else its name.
function Get-Text($el) {
    $p = Get-Pattern $el $P.Value
    if ($null -ne $p) { return [string]$p.Current.Value }
    $p = Get-Pattern $el $P.Text
    if ($null -ne $p) { return [string]$p.DocumentRange.GetText(-1) }
    return [string]$el.Current.Name
}

# A cell's or a row's text: its value when it has one, else its name.
function Get-CellText($el) {
    $p = Get-Pattern $el $P.Value
    if ($null -ne $p -and [string]$p.Current.Value -ne '') { return [string]$p.Current.Value }
    return [string]$el.Current.Name
}

function Invoke-Element($el, $use) {
    $u = ([string]$use).ToLowerInvariant()
    # `pointer` (a click where it shows) is its own pattern here: UIA does not run a modal
    # dialog inside the call that invoked it.
    if ($u -eq 'pointer') { $u = '' }
    if ($u -in '', 'invoke', 'click', 'press', 'activate') {
        $p = Get-Pattern $el $P.Invoke
        if ($null -ne $p) { $p.Invoke(); return }
    }
    if ($u -in '', 'toggle') {
        $p = Get-Pattern $el $P.Toggle
        if ($null -ne $p) { $p.Toggle(); return }
    }
    if ($u -in '', 'expand', 'collapse') {
        $p = Get-Pattern $el $P.Expand
        if ($null -ne $p) {
            $collapsed = $p.Current.ExpandCollapseState -eq [System.Windows.Automation.ExpandCollapseState]::Collapsed
            if ($u -eq 'collapse' -or ($u -eq '' -and -not $collapsed)) { $p.Collapse() } else { $p.Expand() }
            return
        }
    }
    if ($u -in '', 'select') {
        $p = Get-Pattern $el $P.Selection
        if ($null -ne $p) { $p.Select(); return }
    }
    Stop-Run 'failed' @{ message = 'it cannot be invoked: it has no pattern for that (Invoke, Toggle, ExpandCollapse, SelectionItem; `use` picks one)' }
}

# Selects it, or the item named by the step's text inside it (opening a combo box first).
function Select-Element($el, $step) {
    $target = $el
    $opened = $null
    if ($null -ne $step.text) {
        $seg = [pscustomobject]@{ role = '*'; name = [string]$step.text; nth = 1 }
        $near = New-Near
        $target = Find-Descendant (Get-Children $el) $seg $near
        $expand = Get-Pattern $el $P.Expand
        if ($null -eq $target -and $null -ne $expand) {
            $expand.Expand()
            $opened = $expand
            $until = [DateTime]::UtcNow.AddMilliseconds(2000)
            while ($null -eq $target -and [DateTime]::UtcNow -lt $until) {
                Start-Sleep -Milliseconds 50
                $near = New-Near
                $target = Find-Descendant (Get-Children $el) $seg $near
            }
        }
        if ($null -eq $target) { Stop-Run 'not_found' @{ path = $step.path; item = $true; near = (Get-NearList $near) } }
    }
    $p = Get-Pattern $target $P.Selection
    if ($null -ne $p) { $p.Select() }
    else {
        $p = Get-Pattern $target $P.Invoke
        if ($null -eq $p) { Stop-Run 'failed' @{ message = 'it cannot be selected (no SelectionItem or Invoke pattern)' } }
        $p.Invoke()
    }
    if ($null -ne $opened) { try { $opened.Collapse() } catch { } }
}

function Get-State($el) {
    $c = $el.Current
    $s = [ordered]@{ role = (Get-Role $el); name = ([string]$c.Name).Trim(); enabled = $c.IsEnabled; focused = $c.HasKeyboardFocus }
    $states = New-Object System.Collections.Generic.List[string]
    if ($c.IsEnabled) { $states.Add('enabled') }
    if ($c.HasKeyboardFocus) { $states.Add('focused') }
    if (-not $c.IsOffscreen) { $states.Add('showing') }
    $p = Get-Pattern $el $P.Toggle
    if ($null -ne $p) {
        $s.toggle = ([string]$p.Current.ToggleState).ToLowerInvariant()
        if ($s.toggle -eq 'on') { $states.Add('checked') }
    }
    $p = Get-Pattern $el $P.Selection
    if ($null -ne $p) { $s.selected = $p.Current.IsSelected; if ($s.selected) { $states.Add('selected') } }
    $p = Get-Pattern $el $P.Expand
    if ($null -ne $p) {
        $s.expanded = $p.Current.ExpandCollapseState -eq [System.Windows.Automation.ExpandCollapseState]::Expanded
        if ($s.expanded) { $states.Add('expanded') }
    }
    $p = Get-Pattern $el $P.Range
    if ($null -ne $p) { $s.value = $p.Current.Value }
    else {
        $p = Get-Pattern $el $P.Value
        if ($null -ne $p) { $s.value = [string]$p.Current.Value }
    }
    $s.states = $states.ToArray()
    return $s
}

# A list's, table's or tree's rows: a row's text, or its cells' texts.
function Get-Rows($el) {
    $rows = New-Object System.Collections.Generic.List[object]
    foreach ($row in (Get-Children $el)) {
        try {
            if ((Get-Role $row) -in 'ScrollBar', 'Thumb') { continue }
            $cells = Get-Children $row
            if ($cells.Count -eq 0) { $rows.Add((Get-CellText $row)) }
            else {
                $texts = New-Object System.Collections.Generic.List[string]
                foreach ($cell in $cells) { $texts.Add((Get-CellText $cell)) }
                $rows.Add($texts.ToArray())
            }
        } catch { }
    }
    return , $rows.ToArray()
}

# An app greys out what it is not ready for and catches up on its own loop (a dialog's Save
# lights up once the app has seen the name set into its field; pressed before, the press is
# lost): a step that acts waits for its element to take input, a look every 50 ms.
function Wait-Enabled($el) {
    for ($n = 1; -not $el.Current.IsEnabled; $n++) {
        if ($n -ge 60) { Stop-Run 'failed' @{ message = 'it stayed disabled (greyed out) through 60 looks 50 ms apart' } }
        Start-Sleep -Milliseconds 50
    }
}

$results = [ordered]@{}
try {
    if ((Get-Windows).Count -eq 0) {
        $running = @(Get-Process | Where-Object { $_.MainWindowHandle -ne 0 } | ForEach-Object { $_.ProcessName } | Sort-Object -Unique | Select-Object -First 60)
        Stop-Run 'app_not_running' @{ running = $running }
    }
    foreach ($step in @($request.steps)) {
        $action = [string]$step.action
        if ($action -in 'wait', 'gone') { Wait-Step $step }
        else {
            $el = Find-OrStop $step
            # A check box whose argument was not given is left as it is: nothing to wait for.
            if ($action -notin 'read_text', 'read_state', 'read_rows' -and ($action -ne 'check' -or $step.value -is [bool])) { Wait-Enabled $el }
            $key = [string]$step.'as'
            switch ($action) {
                'invoke' { Invoke-Element $el ($step.'use') }
                'set_text' {
                    $p = Get-Pattern $el $P.Value
                    if ($null -eq $p) { Stop-Run 'failed' @{ message = 'it has no editable text (no Value pattern)' } }
                    if ($p.Current.IsReadOnly) { Stop-Run 'failed' @{ message = 'its text cannot be changed (read-only)' } }
                    $p.SetValue([string]$step.text)
                }
                'set_value' {
                    $p = Get-Pattern $el $P.Range
                    if ($null -eq $p) { Stop-Run 'failed' @{ message = 'its value cannot be set (no RangeValue pattern)' } }
                    $p.SetValue([double]$step.value)
                }
                'select' { Select-Element $el $step }
                'check' {
                    # No value: the argument was not given, and the box is left as it is.
                    if ($step.value -is [bool]) {
                        $p = Get-Pattern $el $P.Toggle
                        if ($null -eq $p) { Stop-Run 'failed' @{ message = 'it cannot be turned on or off (no Toggle pattern)' } }
                        $on = $p.Current.ToggleState -eq [System.Windows.Automation.ToggleState]::On
                        if ($on -ne $step.value) { $p.Toggle() }
                    }
                }
                'read_text' { $results[$key] = Get-Text $el }
                'read_state' { $results[$key] = Get-State $el }
                'read_rows' { $results[$key] = Get-Rows $el }
                default { Stop-Run 'failed' @{ message = 'unknown action' } }
            }
        }
        $script:index++
    }
    Write-Reply ([ordered]@{ ok = $true; result = $results })
} catch {
    if ($null -eq $script:failure) {
        $e = $_.Exception
        while ($null -ne $e.InnerException) { $e = $e.InnerException }
        $script:failure = [ordered]@{ kind = 'failed'; step = $script:index; message = $e.Message; code = $e.HResult }
    }
    Write-Reply ([ordered]@{ ok = $false; error = $script:failure })
    exit 1
}
