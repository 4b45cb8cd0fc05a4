# The gateway's fixed Windows desktop program (PowerShell, run with -EncodedCommand). Every
# value arrives as JSON on stdin — {"tool", "args", "max_edge", "protected"} — and never
# becomes program text. The answer is one JSON object on stdout.
$ErrorActionPreference = 'Stop'
Add-Type -AssemblyName System.Drawing, System.Windows.Forms, UIAutomationClient, UIAutomationTypes
Add-Type -TypeDefinition @'
using System;
using System.Runtime.InteropServices;
public static class AaiInput {
  [StructLayout(LayoutKind.Sequential)] public struct MOUSEINPUT { public int dx; public int dy; public uint mouseData; public uint dwFlags; public uint time; public IntPtr extra; }
  [StructLayout(LayoutKind.Sequential)] public struct KEYBDINPUT { public ushort wVk; public ushort wScan; public uint dwFlags; public uint time; public IntPtr extra; }
  [StructLayout(LayoutKind.Explicit)] public struct INPUTUNION { [FieldOffset(0)] public MOUSEINPUT mi; [FieldOffset(0)] public KEYBDINPUT ki; }
  [StructLayout(LayoutKind.Sequential)] public struct INPUT { public uint type; public INPUTUNION u; }
  [StructLayout(LayoutKind.Sequential)] public struct RECT { public int Left; public int Top; public int Right; public int Bottom; }
  [DllImport("user32.dll")] public static extern uint SendInput(uint n, INPUT[] inputs, int size);
  [DllImport("user32.dll")] public static extern bool SetCursorPos(int x, int y);
  [DllImport("user32.dll")] public static extern IntPtr GetForegroundWindow();
  [DllImport("user32.dll")] public static extern bool SetForegroundWindow(IntPtr h);
  [DllImport("user32.dll")] public static extern bool ShowWindow(IntPtr h, int cmd);
  [DllImport("user32.dll")] public static extern bool MoveWindow(IntPtr h, int x, int y, int w, int hh, bool repaint);
  [DllImport("user32.dll")] public static extern bool GetWindowRect(IntPtr h, out RECT r);
  public static void Mouse(uint flags, int data) {
    var i = new INPUT { type = 0 }; i.u.mi.dwFlags = flags; i.u.mi.mouseData = (uint)data;
    SendInput(1, new[] { i }, Marshal.SizeOf(typeof(INPUT)));
  }
  public static void Key(ushort vk, ushort scan, uint flags) {
    var i = new INPUT { type = 1 }; i.u.ki.wVk = vk; i.u.ki.wScan = scan; i.u.ki.dwFlags = flags;
    SendInput(1, new[] { i }, Marshal.SizeOf(typeof(INPUT)));
  }
}
'@

$request = [Console]::In.ReadToEnd() | ConvertFrom-Json
$a = $request.args
$screen = [System.Windows.Forms.SystemInformation]::VirtualScreen
$scale = [Math]::Min(1.0, $request.max_edge / [Math]::Max($screen.Width, $screen.Height))
function Point($x, $y) {
  $px = [Math]::Min([Math]::Max([int]($x / $scale) + $screen.Left, $screen.Left), $screen.Right - 1)
  $py = [Math]::Min([Math]::Max([int]($y / $scale) + $screen.Top, $screen.Top), $screen.Bottom - 1)
  return @($px, $py)
}
function Windows {
  Get-Process | Where-Object { $_.MainWindowHandle -ne 0 } | ForEach-Object {
    $r = New-Object AaiInput+RECT
    [void][AaiInput]::GetWindowRect($_.MainWindowHandle, [ref]$r)
    [pscustomobject]@{ handle = $_.MainWindowHandle; title = $_.MainWindowTitle; name = $_.ProcessName; pid = $_.Id
      bounds = @{ x = [int](($r.Left - $screen.Left) * $scale); y = [int](($r.Top - $screen.Top) * $scale); width = [int](($r.Right - $r.Left) * $scale); height = [int](($r.Bottom - $r.Top) * $scale) }
      focused = ($_.MainWindowHandle -eq [AaiInput]::GetForegroundWindow()) }
  }
}
function IsProtected($w) {
  $text = ($w.name + ' ' + $w.title).ToLower()
  foreach ($p in $request.protected) { if ($text.Contains($p)) { return $true } }
  return $false
}
function RefuseProtected {
  $front = Windows | Where-Object { $_.focused } | Select-Object -First 1
  if ($front -and (IsProtected $front)) { throw "protected:$($front.name)" }
}
function FindWindow($title) {
  $w = Windows | Where-Object { $_.title.ToLower().Contains($title.ToLower()) } | Select-Object -First 1
  if (-not $w) { throw "no window matches `"$title`"" }
  return $w
}
$keys = @{ enter = 0x0D; return = 0x0D; tab = 0x09; esc = 0x1B; escape = 0x1B; backspace = 0x08; delete = 0x2E; space = 0x20
  up = 0x26; down = 0x28; left = 0x25; right = 0x27; home = 0x24; end = 0x23; pageup = 0x21; pagedown = 0x22
  shift = 0x10; ctrl = 0x11; control = 0x11; alt = 0x12; cmd = 0x5B; win = 0x5B; super = 0x5B }
function Vk($name) {
  $n = $name.ToLower()
  if ($keys.ContainsKey($n)) { return $keys[$n] }
  if ($n -match '^f([0-9]{1,2})$') { return 0x6F + [int]$Matches[1] }
  if ($n.Length -eq 1) { return [int][char]$n.ToUpper() }
  throw "unknown key `"$name`""
}

# Text on screen with Windows.Media.Ocr (on-device, shipped with Windows 10+): lines with
# their boxes in the agent's space; lines inside protected windows are left out.
function Recognize {
  Add-Type -AssemblyName System.Runtime.WindowsRuntime
  $null = [Windows.Media.Ocr.OcrEngine, Windows.Foundation, ContentType = WindowsRuntime]
  $null = [Windows.Graphics.Imaging.BitmapDecoder, Windows.Graphics, ContentType = WindowsRuntime]
  $null = [Windows.Storage.StorageFile, Windows.Storage, ContentType = WindowsRuntime]
  $asTask = ([System.WindowsRuntimeSystemExtensions].GetMethods() | Where-Object { $_.Name -eq 'AsTask' -and $_.GetParameters().Count -eq 1 -and $_.GetParameters()[0].ParameterType.Name -eq 'IAsyncOperation`1' })[0]
  function Await($operation, $type) { $task = $asTask.MakeGenericMethod($type).Invoke($null, @($operation)); $task.Wait(); $task.Result }
  $bitmap = New-Object System.Drawing.Bitmap $screen.Width, $screen.Height
  [System.Drawing.Graphics]::FromImage($bitmap).CopyFromScreen($screen.Left, $screen.Top, 0, 0, $bitmap.Size)
  $file = Join-Path ([System.IO.Path]::GetTempPath()) ("aai-ocr-" + [guid]::NewGuid() + ".png")
  $bitmap.Save($file, [System.Drawing.Imaging.ImageFormat]::Png)
  try {
    $storage = Await ([Windows.Storage.StorageFile]::GetFileFromPathAsync($file)) ([Windows.Storage.StorageFile])
    $stream = Await ($storage.OpenAsync([Windows.Storage.FileAccessMode]::Read)) ([Windows.Storage.Streams.IRandomAccessStream])
    $decoder = Await ([Windows.Graphics.Imaging.BitmapDecoder]::CreateAsync($stream)) ([Windows.Graphics.Imaging.BitmapDecoder])
    $soft = Await ($decoder.GetSoftwareBitmapAsync()) ([Windows.Graphics.Imaging.SoftwareBitmap])
    $engine = [Windows.Media.Ocr.OcrEngine]::TryCreateFromUserProfileLanguages()
    $result = Await ($engine.RecognizeAsync($soft)) ([Windows.Media.Ocr.OcrResult])
    $stream.Dispose()
  } finally { Remove-Item -LiteralPath $file -ErrorAction SilentlyContinue }
  $hidden = @(Windows | Where-Object { IsProtected $_ })
  $blocks = @()
  foreach ($line in $result.Lines) {
    $xs = $line.Words | ForEach-Object { $_.BoundingRect }
    $x0 = ($xs | Measure-Object -Property X -Minimum).Minimum; $y0 = ($xs | Measure-Object -Property Y -Minimum).Minimum
    $x1 = ($xs | ForEach-Object { $_.X + $_.Width } | Measure-Object -Maximum).Maximum; $y1 = ($xs | ForEach-Object { $_.Y + $_.Height } | Measure-Object -Maximum).Maximum
    $b = @{ x = [int]($x0 * $scale); y = [int]($y0 * $scale); width = [int](($x1 - $x0) * $scale); height = [int](($y1 - $y0) * $scale) }
    if ($hidden | Where-Object { $b.x -lt $_.bounds.x + $_.bounds.width -and $_.bounds.x -lt $b.x + $b.width -and $b.y -lt $_.bounds.y + $_.bounds.height -and $_.bounds.y -lt $b.y + $b.height }) { continue }
    $blocks += @{ text = $line.Text; bounds = $b; confidence = 0.9 }
  }
  @{ text = ($blocks | ForEach-Object { $_.text }) -join "`n"; blocks = $blocks; engine = 'Windows.Media.Ocr' } | ConvertTo-Json -Compress -Depth 6
}

try {
  switch ($request.tool) {
    'screen_ocr' { Recognize }
    'screenshot' {
      $bitmap = New-Object System.Drawing.Bitmap $screen.Width, $screen.Height
      $g = [System.Drawing.Graphics]::FromImage($bitmap)
      $g.CopyFromScreen($screen.Left, $screen.Top, 0, 0, $bitmap.Size)
      foreach ($w in (Windows | Where-Object { IsProtected $_ })) {
        $g.FillRectangle([System.Drawing.Brushes]::Black, [int]($w.bounds.x / $scale), [int]($w.bounds.y / $scale), [int]($w.bounds.width / $scale), [int]($w.bounds.height / $scale))
      }
      $stream = New-Object System.IO.MemoryStream
      $bitmap.Save($stream, [System.Drawing.Imaging.ImageFormat]::Png)
      @{ png = [Convert]::ToBase64String($stream.ToArray()); desktop = @{ x = 0; y = 0; width = $screen.Width; height = $screen.Height }; scale = $scale } | ConvertTo-Json -Compress
    }
    'mouse_move' { $p = Point $a.x $a.y; [void][AaiInput]::SetCursorPos($p[0], $p[1]); @{ success = $true; position = @{ x = $a.x; y = $a.y } } | ConvertTo-Json -Compress }
    { $_ -in 'left_click', 'right_click', 'double_click' } {
      RefuseProtected
      $p = Point $a.x $a.y; [void][AaiInput]::SetCursorPos($p[0], $p[1])
      $down, $up = if ($request.tool -eq 'right_click') { 0x0008, 0x0010 } else { 0x0002, 0x0004 }
      $mods = @($a.modifiers | Where-Object { $_ } | ForEach-Object { Vk $_ })
      foreach ($m in $mods) { [AaiInput]::Key($m, 0, 0) }
      $times = if ($request.tool -eq 'double_click') { 2 } else { 1 }
      try { for ($i = 0; $i -lt $times; $i++) { [AaiInput]::Mouse($down, 0); [AaiInput]::Mouse($up, 0) } }
      finally { foreach ($m in $mods) { [AaiInput]::Key($m, 0, 2) } }
      @{ success = $true; position = @{ x = $a.x; y = $a.y } } | ConvertTo-Json -Compress
    }
    'mouse_drag' {
      RefuseProtected
      $from = Point $a.from_x $a.from_y; $to = Point $a.to_x $a.to_y
      [void][AaiInput]::SetCursorPos($from[0], $from[1]); [AaiInput]::Mouse(0x0002, 0)
      try {
        $steps = [Math]::Max(1, [int](($(if ($a.duration_ms) { $a.duration_ms } else { 500 })) / 10))
        for ($i = 1; $i -le $steps; $i++) { [void][AaiInput]::SetCursorPos($from[0] + ($to[0] - $from[0]) * $i / $steps, $from[1] + ($to[1] - $from[1]) * $i / $steps); Start-Sleep -Milliseconds 10 }
      } finally { [AaiInput]::Mouse(0x0004, 0) }
      @{ success = $true; position = @{ x = $a.to_x; y = $a.to_y } } | ConvertTo-Json -Compress
    }
    'scroll' {
      RefuseProtected
      $p = Point $a.x $a.y; [void][AaiInput]::SetCursorPos($p[0], $p[1])
      $amount = if ($a.amount) { $a.amount } else { 3 }
      switch ($a.direction) { 'up' { [AaiInput]::Mouse(0x0800, 120 * $amount) } 'down' { [AaiInput]::Mouse(0x0800, -120 * $amount) }
        'left' { [AaiInput]::Mouse(0x1000, -120 * $amount) } 'right' { [AaiInput]::Mouse(0x1000, 120 * $amount) } }
      @{ success = $true; position = @{ x = $a.x; y = $a.y }; steps = $amount } | ConvertTo-Json -Compress
    }
    'type_text' {
      RefuseProtected
      $delay = if ($null -ne $a.delay_ms) { $a.delay_ms } else { 10 }
      $count = 0
      foreach ($unit in [string]$a.text) {
        # KEYEVENTF_UNICODE: the character itself, whatever the layout (surrogates one by one).
        [AaiInput]::Key(0, [uint16][char]$unit, 0x0004); [AaiInput]::Key(0, [uint16][char]$unit, 0x0004 -bor 0x0002)
        $count++; if ($delay -gt 0) { Start-Sleep -Milliseconds $delay }
      }
      @{ success = $true; typed = $count } | ConvertTo-Json -Compress
    }
    { $_ -in 'key_press', 'hotkey' } {
      RefuseProtected
      $codes = @($a.keys | ForEach-Object { Vk $_ })
      try { foreach ($c in $codes) { [AaiInput]::Key($c, 0, 0) } }
      finally { [array]::Reverse($codes); foreach ($c in $codes) { [AaiInput]::Key($c, 0, 2) } }
      @{ success = $true; keys = $a.keys } | ConvertTo-Json -Compress
    }
    'app_list' {
      $apps = Windows | Group-Object pid | ForEach-Object {
        $first = $_.Group[0]
        $app = @{ name = $first.name; pid = $first.pid; window_count = $_.Count; focused = [bool]($_.Group | Where-Object { $_.focused }) }
        if ($a.include_windows) { $app.windows = @($_.Group | ForEach-Object { @{ title = $_.title; bounds = $_.bounds; focused = $_.focused } }) }
        $app
      }
      @{ apps = @($apps) } | ConvertTo-Json -Compress -Depth 6
    }
    'app_launch' {
      $argv = @($a.args | Where-Object { $null -ne $_ })
      $process = if ($argv.Count) { Start-Process -FilePath $a.name -ArgumentList $argv -PassThru } else { Start-Process -FilePath $a.name -PassThru }
      @{ launched = $a.name; pid = $process.Id } | ConvertTo-Json -Compress
    }
    'app_switch' {
      $w = Windows | Where-Object { $_.name -eq $a.name -or $_.title.ToLower().Contains(([string]$a.name).ToLower()) } | Select-Object -First 1
      if (-not $w) { throw "no app matches `"$($a.name)`"" }
      [void][AaiInput]::ShowWindow($w.handle, 9); $ok = [AaiInput]::SetForegroundWindow($w.handle)
      @{ switched = $w.name; focused = $ok } | ConvertTo-Json -Compress
    }
    'app_close' {
      $procs = Get-Process | Where-Object { $_.ProcessName -eq $a.name -or $_.MainWindowTitle.ToLower().Contains(([string]$a.name).ToLower()) }
      foreach ($p in $procs) { if ($a.force) { $p.Kill() } else { [void]$p.CloseMainWindow() } }
      @{ app = $a.name; closed = $true; windows = @($procs).Count } | ConvertTo-Json -Compress
    }
    'window_manage' {
      $w = FindWindow ([string]$a.window_title)
      $b = $a.bounds
      switch ($a.action) {
        'maximize' { [void][AaiInput]::ShowWindow($w.handle, 3) } 'minimize' { [void][AaiInput]::ShowWindow($w.handle, 6) }
        'restore' { [void][AaiInput]::ShowWindow($w.handle, 9) } 'focus' { [void][AaiInput]::SetForegroundWindow($w.handle) }
        'move' { $p = Point $b.x $b.y; [void][AaiInput]::MoveWindow($w.handle, $p[0], $p[1], [int]($w.bounds.width / $scale), [int]($w.bounds.height / $scale), $true) }
        'resize' { [void][AaiInput]::MoveWindow($w.handle, [int]($w.bounds.x / $scale), [int]($w.bounds.y / $scale), [int]($b.width / $scale), [int]($b.height / $scale), $true) }
      }
      @{ window = $w.title; action = $a.action; done = $true } | ConvertTo-Json -Compress
    }
    'element_locate' {
      $wanted = ([string]$a.description).ToLower()
      $root = [System.Windows.Automation.AutomationElement]::FocusedElement
      $top = [System.Windows.Automation.TreeWalker]::ControlViewWalker
      while ($top.GetParent($root) -and $top.GetParent($root) -ne [System.Windows.Automation.AutomationElement]::RootElement) { $root = $top.GetParent($root) }
      $hits = @()
      $all = $root.FindAll([System.Windows.Automation.TreeScope]::Descendants, [System.Windows.Automation.Condition]::TrueCondition)
      foreach ($e in $all) {
        $name = $e.Current.Name
        if (-not $name -or -not $wanted.Contains($name.ToLower())) { continue }
        $r = $e.Current.BoundingRectangle
        $hits += @{ description = $name; role = $e.Current.ControlType.ProgrammaticName; source = 'a11y'; confidence = 0.9
          bounds = @{ x = [int](($r.X - $screen.Left) * $scale); y = [int](($r.Y - $screen.Top) * $scale); width = [int]($r.Width * $scale); height = [int]($r.Height * $scale) } }
        if ($hits.Count -ge $(if ($a.max_results) { $a.max_results } else { 5 })) { break }
      }
      @{ found = $hits.Count -gt 0; elements = $hits } | ConvertTo-Json -Compress -Depth 6
    }
    default { throw "unknown tool $($request.tool)" }
  }
} catch {
  @{ error = $_.Exception.Message } | ConvertTo-Json -Compress
}
